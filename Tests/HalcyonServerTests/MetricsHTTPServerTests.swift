import Testing
@testable import HalcyonServer

@Suite struct MetricsListenAddressTests {
    @Test(arguments: [
        ("127.0.0.1:9464", "127.0.0.1", 9464), ("127.1.2.3:0", "127.1.2.3", 0),
        ("localhost:80", "127.0.0.1", 80), ("[::1]:9464", "::1", 9464),
    ])
    func loopbackIsAccepted(text: String, host: String, port: Int) throws {
        let address = try MetricsListenAddress(parsing: text)
        #expect(address.host == host && address.port == port)
    }

    @Test(arguments: [
        "0.0.0.0:9464", "10.0.0.1:9464", "128.0.0.1:1", "[::]:9464", "example.org:80", "127.0.0.1",
        "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.01:80", "127.0.0.1.5:80", ":80", "[::1]9464",
    ])
    func everythingElseIsRefused(text: String) {
        #expect(throws: MetricsListenAddress.Invalid.self) { try MetricsListenAddress(parsing: text) }
    }
}
