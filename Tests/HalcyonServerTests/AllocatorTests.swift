import Foundation
import HalcyonTestSupport
import Testing

/// halcyond runs on jemalloc (Sources/halcyond/Allocator.swift): the library is mapped into
/// the running daemon and logged at start. A build that dropped the link, or a link the
/// loader resolved to glibc's malloc anyway, fails here.
@Suite("The daemon's allocator", .timeLimit(.minutes(1)))
struct AllocatorTests {
    @Test func daemonMapsJemallocAndNamesIt() throws {
        let daemon = try DaemonProcess(arguments: ["--log-level", "info"])
        let pid = daemon.process.processIdentifier
        // Read to the end: /proc files report size 0, which a one-shot read may trust.
        let handle = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/maps"))
        let maps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        try handle.close()
        #expect(maps.contains("libjemalloc"))
        #expect(daemon.stop() == 0)
        let log = daemon.stderrText()
        #expect(log.contains("memory allocator"))
        #expect(log.contains("jemalloc 5") || log.contains("jemalloc 4"))
    }
}
