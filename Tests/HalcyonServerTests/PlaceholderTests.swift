import Testing

@Test func HalcyonServerTestsPlaceholderBuilds() { #expect(Bool(true)) }
