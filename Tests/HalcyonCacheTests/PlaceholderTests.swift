import Testing

@Test func HalcyonCacheTestsPlaceholderBuilds() { #expect(Bool(true)) }
