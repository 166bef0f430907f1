import Testing

@Test func HalcyonRPCTestsPlaceholderBuilds() { #expect(Bool(true)) }
