// What the daemon tells a person: the start-up line names the cache and every limit, a
// stop asked while it starts is drained once it has started, a start-up failure is
// printed once, `--max-line-bytes` below what any request needs is
// refused, `server.info` names the cache, a value dropped because its file can never be
// written is counted and logged with its key and errno, and a peer the access policy
// refuses is told why before the connection closes.

import Foundation
import HalcyonJSON
import Testing

@Suite("Daemon messages end to end", .serialized, .timeLimit(.minutes(2)))
struct DaemonMessagesEndToEndTests {
    @Test func theListeningLineNamesTheCacheAndEveryLimit() throws {
        let daemon = try DaemonProcess(arguments: ["--log-level", "info", "--name", "blue", "--journal-limit", "3MiB"])
        defer { daemon.cleanUp() }
        let info = try daemon.client().result("server.info")
        #expect(info["cacheName"]?.string == "blue")
        #expect(info["name"]?.string == "halcyond")
        #expect(daemon.stop() == 0)
        let line = try #require(daemon.stderrText().split(separator: "\n").first { $0.contains(" listening") })
        for item in [
            "name=blue", "diskSizeLimit=", "diskExpiration=", "memoryLimit=", "memoryCountLimit=", "memoryExpiration=",
            "maxLineBytes=67108864", "maxBatch=1000", "maxConnections=", "maxInFlight=", "maxOutputBuffer=",
            "maxInputBuffer=", "sweepInterval=", "fsync=everysec", "journalLimit=3145728", "unwrittenLimit=",
            "socketMode=0600", "drainTimeout=", "eventLoops=", "socket=", "cacheFolder=",
        ] {
            #expect(line.contains(item), "\(item) missing from: \(line)")
        }
    }

    /// A SIGTERM that comes while the daemon starts (from its first line on) is not lost:
    /// the daemon finishes starting, drains and exits 0, well within the wait.
    @Test func aStopWhileStartingIsDrainedOnceStarted() throws {
        let daemon = try DaemonProcess(arguments: ["--log-level", "info"], waitUntilReady: false)
        defer { daemon.cleanUp() }
        try #require(daemon.waitForStderr(containing: "memory allocator"))
        kill(daemon.process.processIdentifier, SIGTERM)
        try #require(daemon.waitForExit(timeout: 30), "halcyond did not stop after a SIGTERM during its start")
        #expect(daemon.process.terminationReason == .exit)
        #expect(daemon.process.terminationStatus == 0)
        let text = daemon.stderrText()
        #expect(text.contains("listening"), "\(text)")
        #expect(text.contains("shutting down"), "\(text)")
    }

    @Test func aStartUpFailureIsPrintedOnce() throws {
        let root = URL(fileURLWithPath: "/tmp/hc-\(UUID().uuidString.prefix(8))")
        let shared = root.appendingPathComponent("shared-cache")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        chmod(shared.path, 0o777)
        let daemon = try DaemonProcess(arguments: ["--cache-dir", shared.path], root: root, waitUntilReady: false)
        defer { daemon.cleanUp() }
        try #require(daemon.waitForExit())
        #expect(daemon.process.terminationStatus == 1)
        let text = daemon.stderrText()
        let lines = text.split(separator: "\n").filter { $0.contains(shared.path) }
        #expect(lines.count == 1, "\(text)")
    }

    @Test(arguments: ["10", "1023", "0"])
    func aLineLimitNoRequestFitsInIsRefused(value: String) throws {
        let daemon = try DaemonProcess(arguments: ["--max-line-bytes", value], waitUntilReady: false)
        defer { daemon.cleanUp() }
        try #require(daemon.waitForExit())
        #expect(daemon.process.terminationStatus == 2)
        #expect(daemon.stderrText().contains("--max-line-bytes"))
    }

    @Test func theSmallestLineLimitStillServesRequests() throws {
        let daemon = try DaemonProcess(arguments: ["--max-line-bytes", "1KiB"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        #expect(try client.result("cache.set", #"{"key":"k","value":"v","expiration":{"seconds":60}}"#)["stored"]?.bool == true)
    }

    @Test func aValueWhoseFileCanNeverBeWrittenIsDroppedCountedAndLoggedWithItsKeyAndErrno() throws {
        let daemon = try DaemonProcess(arguments: ["--no-hashed-file-names"])
        defer { daemon.cleanUp() }
        // A directory where the file of `blocked` belongs.
        let folder = daemon.cacheDirectory.appendingPathComponent("default")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("blocked"), withIntermediateDirectories: true)
        let client = try daemon.client()
        #expect(try client.result("cache.set", #"{"key":"blocked","value":"v"}"#)["stored"]?.bool == true)
        #expect(try client.result("cache.set", #"{"key":"next","value":"w"}"#)["stored"]?.bool == true)
        _ = try client.result("cache.trim")  // writes every unwritten value first
        let journal = try client.result("cache.stats")["journal"]
        #expect(journal?["droppedEntries"]?.int64 == 1)
        #expect(journal?["unwrittenEntries"]?.int64 == 0)
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("next").path))
        let metrics = try client.result("server.metrics")["text"]?.string ?? ""
        #expect(metrics.contains("halcyon_journal_dropped_entries_total 1"), "\(metrics)")
        #expect(daemon.stop() == 0)
        let logged = daemon.stderrText().split(separator: "\n").filter { $0.contains("can never be written") }
        #expect(logged.count == 1)
        #expect(logged.first?.contains("key=blocked") == true && logged.first?.contains("errnoName=EISDIR") == true,
                "\(logged)")
    }

    @Test(.enabled(if: geteuid() == 0, "needs root to run a client as nobody"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: ForeignPeerTests.setpriv), "needs setpriv"),
          .enabled(if: FileManager.default.isExecutableFile(atPath: ForeignPeerTests.python), "needs /usr/bin/python3"))
    func aRefusedPeerIsToldWhyBeforeTheClose() throws {
        let daemon = try DaemonProcess(arguments: ["--socket-mode", "0666"])
        defer { daemon.cleanUp() }
        chmod(daemon.root.path, 0o711)
        let client = Process()
        let out = Pipe()
        client.executableURL = URL(fileURLWithPath: ForeignPeerTests.setpriv)
        client.arguments = [
            "--reuid=65534", "--regid=65534", "--clear-groups", ForeignPeerTests.python, "-c",
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]);"
                + " f = s.makefile('rb'); sys.stdout.write(f.readline().decode()); sys.stdout.write(repr(f.read()))",
            daemon.socketPath,
        ]
        client.standardOutput = out
        try client.run()
        client.waitUntilExit()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let line = try #require(text.split(separator: "\n").first.map(String.init))
        let reply = try JSONValue.parse(Array(line.utf8)).get()
        #expect(reply["id"]?.isNull == true)
        #expect(reply["error"]?["code"]?.int64 == -32005)
        #expect(reply["error"]?["data"]?["reason"]?.string == "peerNotAllowed")
        #expect(reply["error"]?["data"]?["uid"]?.int64 == 65534)
        // Then the connection closed: the rest of the stream is empty.
        #expect(text.hasSuffix("b''"), "\(text)")
        #expect(try daemon.client().result("cache.stats")["refusedPeers"]?.int64 == 1)
    }
}
