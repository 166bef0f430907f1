// How a command line becomes a command before any connection: the reordering of global
// options and negative numbers, the resolved context (socket, timeout), the expiration
// options, and the exit status and single error line of each way a command can fail.

import HalcyonJSON
import Testing
@testable import halcyon

@Suite struct CommandLineTests {
    private func reordered(_ arguments: [String]) -> Result<[String], CLIError> {
        Result { () throws(CLIError) in try CLIMain.reorder(arguments) }
    }

    private func usageMessage(_ result: Result<[String], CLIError>) -> String? {
        guard case .failure(.usage(let message)) = result else { return nil }
        return message
    }

    @Test func leadingGlobalOptionsMoveBehindTheCommandName() throws {
        #expect(try CLIMain.reorder(["--socket", "/s", "get", "k"]) == ["get", "--socket", "/s", "k"])
        #expect(try CLIMain.reorder(["-v", "--timeout=5s", "exists", "k"]) == ["exists", "-v", "--timeout=5s", "k"])
        #expect(try CLIMain.reorder(["get", "k", "--socket", "/s"]) == ["get", "k", "--socket", "/s"])
        #expect(try CLIMain.reorder([]) == [])
        #expect(try CLIMain.reorder(["--help"]) == ["--help"])
        #expect(try CLIMain.reorder(["help", "get"]) == ["help", "get"])
    }

    @Test func negativeNumbersGoBehindATerminator() throws {
        #expect(try CLIMain.reorder(["incr", "n", "-3"]) == ["incr", "--", "n", "-3"])
        #expect(try CLIMain.reorder(["incr", "n", "-2.5"]) == ["incr", "--", "n", "-2.5"])
        #expect(try CLIMain.reorder(["incr", "n", "-3", "--initial", "-5"]) == ["incr", "--initial=-5", "--", "n", "-3"])
        #expect(try CLIMain.reorder(["-v", "decr", "n", "-1"]) == ["decr", "-v", "--", "n", "-1"])
        // Not numbers: `-0` is keys' flag, `-3.` and `-x` are left to ArgumentParser.
        #expect(try CLIMain.reorder(["keys", "-0"]) == ["keys", "-0"])
        #expect(try CLIMain.reorder(["incr", "n", "-3."]) == ["incr", "n", "-3."])
        #expect(try CLIMain.reorder(["set", "-x", "v"]) == ["set", "-x", "v"])
        // Words after an explicit `--` are already arguments.
        #expect(try CLIMain.reorder(["set", "--", "-k", "-1"]) == ["set", "--", "-k", "-1"])
        // `lease` keeps its words: after `--` they belong to the command it runs.
        #expect(try CLIMain.reorder(["--socket", "/s", "lease", "k", "--", "sleep", "-1"])
            == ["lease", "--socket", "/s", "k", "--", "sleep", "-1"])
    }

    @Test func malformedCommandLinesAreUsageErrors() {
        #expect(usageMessage(reordered(["--timeout"])) == "missing value for --timeout")
        #expect(usageMessage(reordered(["--socket", "/s"])) == "missing command; see 'halcyon --help'")
        #expect(usageMessage(reordered(["frob", "k"])) == "unknown command 'frob'; see 'halcyon --help'")
        #expect(usageMessage(reordered(["help", "frob"])) == "unknown command 'frob'; see 'halcyon --help'")
    }

    @Test func theContextResolvesTimeoutAndSocket() throws {
        let plain = try CommandContext(
            socket: "/s", timeout: nil, verbose: false, environment: [:], output: .capture(),
            words: ArgumentWords([]), session: nil)
        #expect(plain.socketPath == "/s")
        #expect(plain.timeout == 30)
        #expect(!plain.verbose)
        let timed = try CommandContext(
            socket: nil, timeout: "1m30s", verbose: true, environment: ["HALCYON_SOCKET": "/e"], output: .capture(),
            words: ArgumentWords([]), session: nil)
        #expect(timed.socketPath == "/e")
        #expect(timed.timeout == 90)
        #expect(timed.verbose)
        for (text, message) in [
            ("0", "--timeout: duration '0' must be greater than zero"),
            ("soon", "--timeout: invalid duration 'soon' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)"),
        ] {
            do {
                _ = try CommandContext(
                    socket: "/s", timeout: text, verbose: false, environment: [:], output: .capture(),
                    words: ArgumentWords([]), session: nil)
                Issue.record("--timeout \(text) was accepted")
            } catch {
                #expect(error.line == "usage: \(message)")
                #expect(error.exitCode == 2)
            }
        }
    }

    @Test func theSocketIsTheFlagThenTheEnvironmentThenTheFirstLiveCandidate() {
        let none: (String) -> Bool = { _ in false }
        #expect(SocketPath.resolve(flag: "/f", environment: ["HALCYON_SOCKET": "/e"], uid: 1000, isSocket: none) == "/f")
        #expect(SocketPath.resolve(flag: "", environment: ["HALCYON_SOCKET": "/e"], uid: 1000, isSocket: none) == "/e")
        #expect(SocketPath.resolve(flag: nil, environment: ["HALCYON_SOCKET": ""], uid: 1000, isSocket: none)
            == "/tmp/halcyon-1000/halcyon.sock")
        #expect(SocketPath.resolve(flag: nil, environment: ["XDG_RUNTIME_DIR": "/run/user/7/"], uid: 7, isSocket: none)
            == "/run/user/7/halcyon/halcyon.sock")
        let systemWide: (String) -> Bool = { $0 == "/run/halcyon/halcyon.sock" }
        #expect(SocketPath.resolve(flag: nil, environment: [:], uid: 1000, isSocket: systemWide) == "/run/halcyon/halcyon.sock")
        #expect(SocketPath.candidates(environment: ["XDG_RUNTIME_DIR": "/x"], uid: 5) == [
            "/x/halcyon/halcyon.sock", "/run/user/5/halcyon/halcyon.sock", "/tmp/halcyon-5/halcyon.sock",
            "/run/halcyon/halcyon.sock",
        ])
        // A relative XDG_RUNTIME_DIR is ignored, as the daemon ignores it; no place is listed twice.
        #expect(SocketPath.candidates(environment: ["XDG_RUNTIME_DIR": "run"], uid: 5) == [
            "/run/user/5/halcyon/halcyon.sock", "/tmp/halcyon-5/halcyon.sock", "/run/halcyon/halcyon.sock",
        ])
        #expect(SocketPath.candidates(environment: ["XDG_RUNTIME_DIR": "/run/user/5"], uid: 5) == [
            "/run/user/5/halcyon/halcyon.sock", "/tmp/halcyon-5/halcyon.sock", "/run/halcyon/halcyon.sock",
        ])
    }

    @Test func expirationOptionsBecomeTheProtocolsForms() throws {
        func json(_ expiration: Expiration) -> String {
            var writer = JSONWriter()
            expiration.write(to: &writer)
            return String(decoding: writer.bytes, as: UTF8.self)
        }
        #expect(json(try Expiration.ttl("never", option: "--ttl")) == #""never""#)
        #expect(json(try Expiration.ttl("NEVER", option: "--ttl")) == #""never""#)
        #expect(json(try Expiration.ttl("10m", option: "--ttl")) == #"{"seconds":600}"#)
        #expect(json(try Expiration.ttl("1.5", option: "--ttl")) == #"{"seconds":1.5}"#)
        #expect(json(try Expiration.ttl("0", option: "touch", zeroExpiresNow: true)) == #""expired""#)
        #expect(json(try #require(try Expiration.choose(ttl: nil, expiresAt: "2026-11-23T10:00:00Z", never: false)))
            == #"{"date":1795428000}"#)
        #expect(json(try #require(try Expiration.choose(ttl: nil, expiresAt: nil, never: true))) == #""never""#)
        #expect(try Expiration.choose(ttl: nil, expiresAt: nil, never: false) == nil)
    }

    @Test func badExpirationOptionsAreUsageErrors() {
        func line(_ body: () throws -> Expiration?) -> String? {
            do {
                _ = try body()
                return nil
            } catch let error as CLIError {
                return error.line
            } catch {
                return "\(error)"
            }
        }
        #expect(line { try Expiration.ttl("0", option: "--ttl") } == "usage: --ttl: duration '0' must be greater than zero")
        #expect(line { try Expiration.choose(ttl: "1m", expiresAt: "1", never: false) }
            == "usage: give only one of --ttl, --expires-at and --never")
        #expect(line { try Expiration.choose(ttl: nil, expiresAt: "1", never: true) }
            == "usage: give only one of --ttl, --expires-at and --never")
        #expect(line { try Expiration.choose(ttl: nil, expiresAt: "tomorrow", never: false) }
            == "usage: --expires-at: invalid time 'tomorrow' (use Unix seconds or ISO 8601 such as 2026-11-23T10:00:00Z)")
    }

    @Test func eachOutcomeHasItsStatusAndAtMostOneLine() {
        let cases: [(CLIError, Int32, String?)] = [
            (.miss, 1, nil),
            (.leased, 3, nil),
            (.childFailed(status: 42), 42, nil),
            (.cannotRun(status: 127, message: "no such program"), 127, "cannotRun: no such program"),
            (.usage("bad"), 2, "usage: bad"),
            (.transport(line: "cannotConnect: refused"), 2, "cannotConnect: refused"),
            (.rpc(code: -32602, reason: "invalidKey", message: "empty key"), 2, "invalidKey: empty key (-32602)"),
            (.badReply("not JSON"), 2, "badReply: not JSON"),
            (.input(reason: "notUTF8", message: "bytes"), 2, "notUTF8: bytes"),
        ]
        for (error, status, line) in cases {
            #expect(error.exitCode == status, "\(error)")
            #expect(error.line == line, "\(error)")
        }
    }

    /// Whole commands that end before a connection is made: what a user sees for each.
    @Test func commandsRefusedBeforeConnecting() {
        func run(_ words: [String]) -> CLIMain.Outcome {
            CLIMain.execute(
                ArgumentWords(words.map { Array($0.utf8) }), environment: ["HALCYON_SOCKET": "/nonexistent/halcyon.sock"],
                output: .capture(), session: nil)
        }
        let timeout = run(["--timeout", "0", "get", "k"])
        #expect(timeout.status == 2)
        #expect(timeout.errorLine == "usage: --timeout: duration '0' must be greater than zero")
        let empty = run([])
        #expect(empty.status == 2)
        #expect(empty.errorLine == "usage: missing command; see 'halcyon --help'")
        let unknown = run(["frob"])
        #expect(unknown.errorLine == "usage: unknown command 'frob'; see 'halcyon --help'")
        let dashed = run(["get", "-k"])
        #expect(dashed.status == 2)
        #expect(dashed.errorLine?.hasSuffix("(a key that starts with '-' goes after '--': halcyon get -- -key)") == true)
        let notText = CLIMain.execute(
            ArgumentWords([Array("get".utf8), [0xFF]]), environment: [:], output: .capture(), session: nil)
        #expect(notText.status == 2)
        #expect(notText.errorLine
            == "notUTF8: an argument is not valid UTF-8: keys, prefixes and options are text; only a VALUE may hold other bytes")
    }

    @Test func dashHintsNameTheWayForEachCommand() {
        #expect(CLIMain.dashHint(command: "set") == "a key or value that starts with '-' goes after '--': halcyon set -- -key -value")
        #expect(CLIMain.dashHint(command: "keys") == "a prefix that starts with '-' goes after '--': halcyon keys -- -prefix")
        #expect(CLIMain.dashHint(command: "lease") == "a key that starts with '-' goes in --key: halcyon lease --key -key -- COMMAND")
        #expect(CLIMain.dashHint(command: "stats") == nil)
    }

    @Test func wordsThatAreNotUTF8TravelAsStandIns() {
        let words = ArgumentWords([Array("set".utf8), Array("k".utf8), [0xFF, 0x00]])
        #expect(words.strings.prefix(2) == ["set", "k"])
        let standIn = words.strings[2]
        #expect(words.isStandIn(standIn))
        #expect(!words.isStandIn("k"))
        #expect(words.bytes(of: standIn) == [0xFF, 0x00])
        #expect(words.bytes(of: "k") == [UInt8(ascii: "k")])
        #expect(Array(words.standIns) == [standIn])
    }
}
