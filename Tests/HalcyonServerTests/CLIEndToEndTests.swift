// The `halcyon` command driven as a user would: the built binary, started with
// Process, against a real halcyond on a private socket.

import Foundation
import HalcyonJSON
import Testing

private func json(_ run: CLIRun) throws -> JSONValue {
    try JSONValue.parse(run.stdout).get()
}

@Suite("halcyon CLI end to end", .timeLimit(.minutes(1)))
struct CLIEndToEndTests {
    // MARK: Values

    @Test func allByteValuesRoundTripThroughStdin() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let all = (0...255).map { UInt8($0) }
        let set = try CLIProcess.run(["set", "bytes"], socket: daemon.socketPath, stdin: all)
        #expect(set.status == 0)
        #expect(set.stdout.isEmpty && set.stderr.isEmpty)
        let get = try CLIProcess.run(["get", "bytes"], socket: daemon.socketPath)
        #expect(get.status == 0)
        #expect(get.stdout == all)
        #expect(get.stderr.isEmpty)
        // Not valid UTF-8, so it was stored as raw bytes and is remembered as such.
        let describe = try json(CLIProcess.run(["describe", "bytes", "--json"], socket: daemon.socketPath))
        #expect(describe["encoding"]?.string == "base64")
        #expect(describe["size"]?.int64 == 256)

        // `-` reads stdin too, and a value of only NULs and line feeds survives.
        let odd: [UInt8] = [0, 10, 0, 13, 10, 0]
        #expect(try CLIProcess.run(["set", "odd", "-"], socket: daemon.socketPath, stdin: odd).status == 0)
        #expect(try CLIProcess.run(["get", "odd"], socket: daemon.socketPath).stdout == odd)
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func randomBinaryRoundTrips(seed: UInt64) throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        var generator = SplitMix64(seed: seed)
        let count = Int.random(in: 0...300_000, using: &generator)
        let value = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let key = "random-\(seed)-\u{1F600}"
        let set = try CLIProcess.run(["set", key], socket: daemon.socketPath, stdin: value)
        #expect(set.status == 0, "\(set.stderrText)")
        let get = try CLIProcess.run(["get", key], socket: daemon.socketPath)
        #expect(get.status == 0)
        #expect(get.stdout == value, "seed \(seed), \(count) bytes")
    }

    @Test func utf8ValuesFromArgumentsAndStdin() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let text = "héllo \"wörld\"\n\ttab ✓"
        #expect(try CLIProcess.run(["set", "greeting", text], socket: daemon.socketPath).status == 0)
        #expect(try CLIProcess.run(["get", "greeting"], socket: daemon.socketPath).stdoutText == text)
        #expect(try CLIProcess.run(["get", "greeting", "--encoding", "utf8"], socket: daemon.socketPath).stdoutText == text)
        let base64 = try CLIProcess.run(["get", "greeting", "--encoding", "base64"], socket: daemon.socketPath)
        #expect(base64.stdoutText == StrictBase64.encodeToString(Array(text.utf8)) + "\n")
        let described = try json(CLIProcess.run(["describe", "greeting", "--json"], socket: daemon.socketPath))
        #expect(described["encoding"]?.string == "utf8")

        // Valid UTF-8 on stdin is stored as utf8 as well, so other clients read text.
        let piped = Array("from a pipe\n".utf8)
        #expect(try CLIProcess.run(["set", "piped"], socket: daemon.socketPath, stdin: piped).status == 0)
        let raw = try json(CLIProcess.run(["call", "cache.get", #"{"key":"piped"}"#], socket: daemon.socketPath))
        #expect(raw["encoding"]?.string == "utf8")
        #expect(raw["value"]?.string == "from a pipe\n")

        // The empty value is a value, not a miss.
        #expect(try CLIProcess.run(["set", "empty", ""], socket: daemon.socketPath).status == 0)
        let empty = try CLIProcess.run(["get", "empty"], socket: daemon.socketPath)
        #expect(empty.status == 0 && empty.stdout.isEmpty)
    }

    @Test func jsonValues() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let input = Array("{\n  \"a\": [1, 2.5, null],\n  \"b\": \"x\"\n}\n".utf8)
        let set = try CLIProcess.run(["set", "doc", "--json"], socket: daemon.socketPath, stdin: input)
        #expect(set.status == 0, "\(set.stderrText)")
        #expect(try CLIProcess.run(["get", "doc"], socket: daemon.socketPath).stdoutText == #"{"a":[1,2.5,null],"b":"x"}"#)
        let asJSON = try CLIProcess.run(["get", "doc", "--encoding", "json"], socket: daemon.socketPath)
        #expect(asJSON.stdoutText == #"{"a":[1,2.5,null],"b":"x"}"# + "\n")
        let described = try json(CLIProcess.run(["describe", "doc", "--json"], socket: daemon.socketPath))
        #expect(described["encoding"]?.string == "json")

        // A scalar from an argument.
        #expect(try CLIProcess.run(["set", "n", "42", "--json"], socket: daemon.socketPath).status == 0)
        let n = try json(CLIProcess.run(["call", "cache.get", #"{"key":"n"}"#], socket: daemon.socketPath))
        #expect(n["value"]?.int64 == 42)

        // Invalid JSON is refused before anything is sent.
        let bad = try CLIProcess.run(["set", "bad", "--json", "{nope"], socket: daemon.socketPath)
        #expect(bad.status == 2)
        #expect(bad.stderrLines.count == 1)
        #expect(bad.stderrText.hasPrefix("halcyon: invalidJSON: "))
        #expect(try CLIProcess.run(["exists", "bad"], socket: daemon.socketPath).status == 1)
    }

    // MARK: Keys

    @Test func getMissExitsOneSilently() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let miss = try CLIProcess.run(["get", "nothing"], socket: daemon.socketPath)
        #expect(miss.status == 1)
        #expect(miss.stdout.isEmpty)
        #expect(miss.stderr.isEmpty)
    }

    @Test func removeExistsDescribeTouch() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        #expect(try CLIProcess.run(["set", "k", "12345", "--ttl", "10m"], socket: s).status == 0)

        let exists = try CLIProcess.run(["exists", "k"], socket: s)
        #expect(exists.status == 0 && exists.stdout.isEmpty)
        #expect(try CLIProcess.run(["exists", "k", "-v"], socket: s).stdoutText == "memory\n")
        #expect(try CLIProcess.run(["-v", "exists", "k"], socket: s).stdoutText == "memory\n")

        let human = try CLIProcess.run(["describe", "k"], socket: s)
        #expect(human.status == 0)
        #expect(human.stdoutText.contains("size:        5 bytes"))
        #expect(human.stdoutText.contains("encoding:    utf8"))
        #expect(human.stdoutText.contains("tier:        memory"))
        // One lifetime whichever tier answers (the 10 minutes of --ttl), and how long the
        // memory copy stays in RAM beside it.
        #expect(human.stdoutText.contains("expires:     in 10m") || human.stdoutText.contains("expires:     in 9m"))
        #expect(human.stdoutText.contains("; in memory for "))
        #expect(human.stdoutText.contains("last access: "))
        // The disk tier reports the same lifetime.
        #expect(try CLIProcess.run(["clear", "--memory-only"], socket: s).status == 0)
        let raw = try json(CLIProcess.run(["describe", "k", "--json"], socket: s))
        #expect(raw["cacheType"]?.string == "disk")
        let now = Date().timeIntervalSince1970
        let expiresAt = try #require(raw["expiresAt"]?.double)
        #expect(abs(expiresAt - (now + 600)) < 30)

        let touched = try CLIProcess.run(["touch", "k", "never"], socket: s)
        #expect(touched.status == 0)
        #expect(try CLIProcess.run(["clear", "--memory-only"], socket: s).status == 0)
        #expect(try json(CLIProcess.run(["describe", "k", "--json"], socket: s))["expiresAt"]?.isNull == true)
        // Rounded down from what is left when the CLI prints: "in 2h", or a second or so less
        // when the machine is slow between the daemon's reply and the print.
        let touchedFor = try CLIProcess.run(["touch", "k", "2h", "-v"], socket: s).stdoutText
        #expect(touchedFor.hasPrefix("in 2h") || touchedFor.hasPrefix("in 1h 59m"), "\(touchedFor)")
        #expect(try CLIProcess.run(["touch", "missing", "1h"], socket: s).status == 1)

        #expect(try CLIProcess.run(["rm", "k"], socket: s).status == 0)
        #expect(try CLIProcess.run(["rm", "k"], socket: s).status == 1)
        let gone = try CLIProcess.run(["exists", "k", "-v"], socket: s)
        #expect(gone.status == 1 && gone.stdout.isEmpty)
        let describeMiss = try CLIProcess.run(["describe", "k"], socket: s)
        #expect(describeMiss.status == 1 && describeMiss.stdout.isEmpty)
        let describeMissJSON = try CLIProcess.run(["describe", "k", "--json"], socket: s)
        #expect(describeMissJSON.status == 1)
        #expect(try json(describeMissJSON)["found"]?.bool == false)
    }

    @Test func expirationOptions() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let now = Date().timeIntervalSince1970

        let at = Int(now) + 86_400
        #expect(try CLIProcess.run(["set", "a", "x", "--ttl", "1h30m"], socket: s).status == 0)
        #expect(try CLIProcess.run(["set", "b", "x", "--expires-at", String(at)], socket: s).status == 0)
        #expect(try CLIProcess.run(["set", "c", "x", "--never"], socket: s).status == 0)
        #expect(try CLIProcess.run(["set", "i", "x", "--expires-at", "2100-01-01T00:00:00Z"], socket: s).status == 0)
        // The memory tier answers with its own (shorter) expiry; ask the disk tier.
        #expect(try CLIProcess.run(["clear", "--memory-only"], socket: s).status == 0)
        let a = try #require(try json(CLIProcess.run(["describe", "a", "--json"], socket: s))["expiresAt"]?.double)
        #expect(abs(a - (now + 5400)) < 30)
        #expect(try json(CLIProcess.run(["describe", "b", "--json"], socket: s))["expiresAt"]?.int64 == Int64(at))
        #expect(try json(CLIProcess.run(["describe", "c", "--json"], socket: s))["expiresAt"]?.isNull == true)
        #expect(try json(CLIProcess.run(["describe", "i", "--json"], socket: s))["expiresAt"]?.int64 == 4_102_444_800)

        // A past instant stores nothing and still succeeds, as the protocol says.
        let past = try CLIProcess.run(["set", "d", "x", "--expires-at", "2001-01-01T00:00:00Z", "-v"], socket: s)
        #expect(past.status == 0)
        #expect(try json(past)["stored"]?.bool == false)
        #expect(try CLIProcess.run(["exists", "d"], socket: s).status == 1)

        // Memory only.
        #expect(try CLIProcess.run(["set", "m", "x", "--no-disk", "--memory-ttl", "30s"], socket: s).status == 0)
        #expect(try CLIProcess.run(["exists", "m", "-v"], socket: s).stdoutText == "memory\n")
        #expect(try CLIProcess.run(["clear", "--memory-only"], socket: s).status == 0)
        #expect(try CLIProcess.run(["get", "m"], socket: s).status == 1)

        for bad in [["--ttl", "10x"], ["--ttl", "0s"], ["--ttl", "1m", "--never"], ["--expires-at", "tomorrow"]] {
            let run = try CLIProcess.run(["set", "e", "x"] + bad, socket: s)
            #expect(run.status == 2, "\(bad)")
            #expect(run.stderrLines.count == 1, "\(bad): \(run.stderrText)")
            #expect(run.stderrText.hasPrefix("halcyon: usage: "), "\(bad): \(run.stderrText)")
        }
    }

    @Test func durationForms() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let forms: [(String, Double)] = [
            ("90", 90), ("1.5m", 90), ("2m30s", 150), ("1h30m", 5400), ("2h", 7200), ("7d", 604_800), ("1w", 604_800),
        ]
        let now = Date().timeIntervalSince1970
        for (index, form) in forms.enumerated() {
            let run = try CLIProcess.run(["set", "d\(index)", "x", "--ttl", form.0], socket: s)
            #expect(run.status == 0, "\(form.0): \(run.stderrText)")
        }
        #expect(try CLIProcess.run(["clear", "--memory-only"], socket: s).status == 0)
        for (index, form) in forms.enumerated() {
            let described = try json(CLIProcess.run(["describe", "d\(index)", "--json"], socket: s))
            let expiresAt = try #require(described["expiresAt"]?.double, "\(form.0)")
            #expect(abs(expiresAt - (now + form.1)) < 30, "\(form.0)")
        }
    }

    // MARK: Server and maintenance

    @Test func pingInfoStatsClearTrimSize() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let ping = try CLIProcess.run(["ping"], socket: s)
        #expect(ping.status == 0 && ping.stdoutText == "PONG\n")

        let info = try json(CLIProcess.run(["info", "--json"], socket: s))
        #expect(info["name"]?.string == "halcyond")
        #expect(info["socket"]?.string == s)
        let infoText = try CLIProcess.run(["info"], socket: s).stdoutText
        #expect(infoText.contains("name"))
        #expect(infoText.contains(s))
        #expect(infoText.contains("limits.maxBatch"))

        for key in ["a", "b", "c"] { _ = try CLIProcess.run(["set", key, "value"], socket: s) }
        _ = try CLIProcess.run(["get", "a"], socket: s)
        let stats = try json(CLIProcess.run(["stats", "--json"], socket: s))
        #expect((stats["memory"]?["hits"]?.int64 ?? 0) >= 1)
        let statsText = try CLIProcess.run(["stats"], socket: s)
        #expect(statsText.status == 0)
        #expect(statsText.stdoutText.contains("memory.hits"))

        let size = try CLIProcess.run(["size", "--json"], socket: s)
        #expect(try json(size)["count"]?.int64 == 3)

        let trim = try CLIProcess.run(["trim", "--json"], socket: s)
        #expect(trim.status == 0)
        #expect(try json(trim)["removed"]?.int64 == 0)
        #expect(try CLIProcess.run(["trim"], socket: s).stdoutText.hasPrefix("removed 0; disk tier now "))
        #expect(try CLIProcess.run(["remove-expired"], socket: s).stdoutText == "removed 0\n")

        #expect(try CLIProcess.run(["clear", "--disk-only"], socket: s).status == 0)
        #expect(try CLIProcess.run(["exists", "a", "-v"], socket: s).stdoutText == "memory\n")
        let cleared = try CLIProcess.run(["clear"], socket: s)
        #expect(cleared.status == 0 && cleared.stdoutText.hasPrefix("removed "))
        #expect(try CLIProcess.run(["get", "a"], socket: s).status == 1)
        #expect(try CLIProcess.run(["clear", "--memory-only", "--disk-only"], socket: s).status == 2)
    }

    @Test func callAnyMethod() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let ping = try CLIProcess.run(["call", "server.ping"], socket: s)
        #expect(ping.status == 0 && ping.stdoutText == "{\"pong\":true}\n")
        let set = try CLIProcess.run(["call", "cache.set", "-"], socket: s, stdin: Array(#"{"key":"k","value":"AP8=","encoding":"base64"}"#.utf8))
        #expect(try json(set)["size"]?.int64 == 2)
        #expect(try CLIProcess.run(["get", "k"], socket: s).stdout == [0, 255])
        let miss = try CLIProcess.run(["call", "cache.get", #"{"key":"none"}"#], socket: s)
        #expect(miss.status == 0 && miss.stdoutText == "{\"found\":false}\n")

        let unknown = try CLIProcess.run(["call", "cache.nope"], socket: s)
        #expect(unknown.status == 2 && unknown.stdout.isEmpty)
        #expect(unknown.stderrLines.count == 1)
        #expect(unknown.stderrText.hasPrefix("halcyon: methodNotFound: "))
        let positional = try CLIProcess.run(["call", "cache.get", #"["a"]"#], socket: s)
        #expect(positional.status == 2 && positional.stderrText.hasPrefix("halcyon: positionalParams: "))
        let notJSON = try CLIProcess.run(["call", "cache.get", "{"], socket: s)
        #expect(notJSON.status == 2 && notJSON.stderrText.hasPrefix("halcyon: invalidJSON: "))
    }

    // MARK: Errors

    @Test func daemonErrorsExitTwoNamingTheReason() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let longKey = String(repeating: "k", count: 5000)
        let tooLong = try CLIProcess.run(["set", longKey, "x"], socket: s)
        #expect(tooLong.status == 2)
        #expect(tooLong.stderrLines.count == 1)
        #expect(tooLong.stderrText.hasPrefix("halcyon: keyTooLong: "))
        #expect(tooLong.stderrText.hasSuffix("(-32602)\n"))

        let empty = try CLIProcess.run(["get", ""], socket: s)
        #expect(empty.status == 2 && empty.stderrText.hasPrefix("halcyon: emptyKey: "))

        _ = try CLIProcess.run(["set", "bin"], socket: s, stdin: [0xFF, 0xFE])
        let cannot = try CLIProcess.run(["get", "bin", "--encoding", "utf8"], socket: s)
        #expect(cannot.status == 2 && cannot.stdout.isEmpty)
        #expect(cannot.stderrText.hasPrefix("halcyon: cannotEncode: "))
    }

    @Test func noDaemonIsAClearError() throws {
        let path = "/tmp/hc-none-\(UUID().uuidString.prefix(8)).sock"
        let run = try CLIProcess.run(["ping"], socket: path)
        #expect(run.status == 2)
        #expect(run.stdout.isEmpty)
        #expect(run.stderrText == "halcyon: cannotConnect: cannot connect to \(path): No such file or directory (daemon not running?)\n")
        // The same for a key command, which must not read stdin first and hang.
        #expect(try CLIProcess.run(["get", "k"], socket: path).status == 2)
    }

    /// A listening Unix socket at a fresh path that never answers anything.
    private func listeningSocket(_ name: String) throws -> (fd: Int32, path: String) {
        let path = "/tmp/hc-\(name)-\(UUID().uuidString.prefix(8)).sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        try #require(listen(fd, 8) == 0)
        return (fd, path)
    }

    @Test func silentServerTimesOut() throws {
        // Never accepted: connect succeeds (backlog), no reply comes.
        let (fd, path) = try listeningSocket("mute")
        defer { close(fd); unlink(path) }
        let run = try CLIProcess.run(["--timeout", "300ms", "ping"], socket: path)
        #expect(run.status == 2)
        #expect(run.stderrLines.count == 1)
        #expect(run.stderrText.hasPrefix("halcyon: timeout: "), "\(run.stderrText)")
    }

    @Test func serverHangingUpIsAClearError() throws {
        // Accepts, reads the request, and closes without a reply.
        let (fd, path) = try listeningSocket("hangup")
        defer { close(fd); unlink(path) }
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let peer = accept(fd, nil, nil)
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = buffer.withUnsafeMutableBytes { read(peer, $0.baseAddress, $0.count) }
            close(peer)
            done.signal()
        }
        let run = try CLIProcess.run(["ping"], socket: path)
        done.wait()
        #expect(run.status == 2)
        #expect(run.stderrText == "halcyon: connectionClosed: the daemon closed the connection (\(path))\n")
    }

    @Test func usageErrorsExitTwoWithOneLine() throws {
        for arguments in [[], ["bogus"], ["get"], ["get", "a", "--encoding", "latin1"], ["--timeout", "soon", "ping"], ["touch", "k"], ["--socket"], ["-v"], ["get", "a", "b"]] {
            let run = try CLIProcess.run(arguments, socket: "/tmp/hc-unused.sock")
            #expect(run.status == 2, "\(arguments)")
            #expect(run.stderrLines.count == 1, "\(arguments): \(run.stderrText)")
            #expect(run.stderrText.hasPrefix("halcyon: usage: "), "\(arguments): \(run.stderrText)")
        }
        let unknown = try CLIProcess.run(["bogus"])
        #expect(unknown.stderrText == "halcyon: usage: unknown command 'bogus'; see 'halcyon --help'\n")
        let help = try CLIProcess.run(["--help"])
        #expect(help.status == 0)
        #expect(help.stdoutText.contains("describe"))
        let subHelp = try CLIProcess.run(["set", "--help"])
        #expect(subHelp.status == 0 && subHelp.stdoutText.contains("--ttl"))
        let helpCommand = try CLIProcess.run(["help", "touch"])
        #expect(helpCommand.status == 0 && helpCommand.stdoutText.contains("<ttl>"))
    }

    // MARK: Finding the socket

    @Test func socketFromEnvironmentAndFlags() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let fromEnvironment = try CLIProcess.run(["ping"], environment: ["HALCYON_SOCKET": daemon.socketPath])
        #expect(fromEnvironment.status == 0 && fromEnvironment.stdoutText == "PONG\n")

        // The flag wins over the environment, before or after the command name.
        let wrong = "/tmp/hc-wrong-\(UUID().uuidString.prefix(8)).sock"
        #expect(try CLIProcess.run(["--socket", daemon.socketPath, "ping"], environment: ["HALCYON_SOCKET": wrong]).status == 0)
        #expect(try CLIProcess.run(["ping", "--socket=\(daemon.socketPath)"], environment: ["HALCYON_SOCKET": wrong]).status == 0)
        let flagWrong = try CLIProcess.run(["ping", "--socket", wrong], environment: ["HALCYON_SOCKET": daemon.socketPath])
        #expect(flagWrong.status == 2 && flagWrong.stderrText.contains(wrong))

        // Then $XDG_RUNTIME_DIR/halcyon/halcyon.sock (a link to the daemon's socket here).
        let runtime = daemon.root.appendingPathComponent("xdg")
        try FileManager.default.createDirectory(at: runtime.appendingPathComponent("halcyon"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: runtime.appendingPathComponent("halcyon/halcyon.sock").path, withDestinationPath: daemon.socketPath)
        let xdg = try CLIProcess.run(["ping"], environment: ["XDG_RUNTIME_DIR": runtime.path])
        #expect(xdg.status == 0, "\(xdg.stderrText)")

        // Without any of them: /tmp/halcyon-<euid>/halcyon.sock, named in the error when absent.
        let fallback = try CLIProcess.run(["ping", "--timeout", "2s"])
        if fallback.status != 0 {
            #expect(fallback.stderrText.contains("/tmp/halcyon-\(geteuid())/halcyon.sock"))
        }
    }
}
