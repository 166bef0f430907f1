import Testing

@Test func HalcyonJSONTestsPlaceholderBuilds() { #expect(Bool(true)) }
