// The CLI's atomic, listing and lease commands (add, incr/decr, cas, keys, rm-prefix, lease/release,
// describe's version) against a real daemon, and the duration grammar it shares with the
// daemon (the table in Docs/DURATIONS.md).

import Foundation
import HalcyonJSON
import HalcyonSupport
import Testing
@testable import HalcyonServer

@Suite struct CLIFeaturesTests {
    @Test func addIncrDecrCas() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        #expect(try CLIProcess.run(["add", "once", "first", "--ttl", "1h"], socket: s).status == 0)
        let second = try CLIProcess.run(["add", "once", "second"], socket: s)
        #expect(second.status == 1 && second.stdout.isEmpty && second.stderr.isEmpty)
        #expect(try CLIProcess.run(["get", "once"], socket: s).stdoutText == "first")

        #expect(try CLIProcess.run(["incr", "n"], socket: s).stdoutText == "1\n")
        #expect(try CLIProcess.run(["incr", "n", "10"], socket: s).stdoutText == "11\n")
        #expect(try CLIProcess.run(["decr", "n", "4"], socket: s).stdoutText == "7\n")
        #expect(try CLIProcess.run(["incr", "fresh", "--initial", "100"], socket: s).stdoutText == "101\n")
        let notInt = try CLIProcess.run(["incr", "once"], socket: s)
        #expect(notInt.status == 2)
        #expect(notInt.stderrText.hasPrefix("halcyon: notAnInteger: "))

        let described = try CLIProcess.run(["describe", "once", "--json"], socket: s)
        let version = try #require(try JSONValue.parse(described.stdout).get()["version"]?.int64)
        let text = try CLIProcess.run(["describe", "once"], socket: s).stdoutText
        #expect(text.contains("version:     \(version)\n"))
        let stale = try CLIProcess.run(["cas", "once", String(version + 1), "nope"], socket: s)
        #expect(stale.status == 1)
        let swapped = try CLIProcess.run(["cas", "once", String(version), "swapped"], socket: s)
        #expect(swapped.status == 0)
        #expect(Int64(swapped.stdoutText.trimmingCharacters(in: .newlines)) != version)
        #expect(try CLIProcess.run(["get", "once"], socket: s).stdoutText == "swapped")
    }

    @Test func keysPagesAndRmPrefix() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let c = try daemon.client()
        for i in 0..<12 { _ = try c.result("cache.set", #"{"key":"job:\#(i)","value":"v"}"#) }
        _ = try c.result("cache.set", #"{"key":"other","value":"v"}"#)
        let listed = try CLIProcess.run(["keys", "job:", "--page-size", "5"], socket: s)
        #expect(listed.status == 0)
        let lines = listed.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.count == 12)
        #expect(Set(lines) == Set((0..<12).map { "job:\($0)" }))
        #expect(try CLIProcess.run(["keys"], socket: s).stdoutText.split(separator: "\n").count == 13)

        let removed = try CLIProcess.run(["rm-prefix", "job:"], socket: s)
        #expect(removed.status == 0 && removed.stdoutText == "12\n")
        #expect(try CLIProcess.run(["rm-prefix", "job:"], socket: s).status == 1)
        #expect(try CLIProcess.run(["keys"], socket: s).stdoutText == "other\n")
    }

    @Test func leaseRunsTheCommandOnceAndCachesOnlySuccess() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        let counter = daemon.root.appendingPathComponent("runs").path
        let command = ["--", "sh", "-c", "echo run >> \(counter); sleep 0.3; echo value"]
        let runs = (0..<8).map { _ in Locked<CLIRun?>(nil) }
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let run = try? CLIProcess.run(["lease", "page", "--lease-ttl", "1m", "--wait", "30s"] + command, socket: s)
            runs[i].withLock { $0 = run }
        }
        for run in runs.map({ $0.withLock { $0 } }) {
            #expect(run?.status == 0, "\(run?.stderrText ?? "did not run")")
            #expect(run?.stdoutText == "value\n")
        }
        #expect(try String(contentsOfFile: counter, encoding: .utf8) == "run\n")
        #expect(try CLIProcess.run(["get", "page"], socket: s).stdoutText == "value\n")

        let failed = try CLIProcess.run(["lease", "bad", "--", "sh", "-c", "echo partial; exit 7"], socket: s)
        #expect(failed.status == 7 && failed.stdoutText == "partial\n" && failed.stderr.isEmpty)
        #expect(try CLIProcess.run(["get", "bad"], socket: s).status == 1)
        #expect(try CLIProcess.run(["lease", "bad"], socket: s).status == 2)  // no COMMAND

        // A key starting with '-' goes in --key (after `--` comes the command).
        let dashed = try CLIProcess.run(["lease", "--key", "-dash", "--", "sh", "-c", "echo dashed"], socket: s)
        #expect(dashed.status == 0 && dashed.stdoutText == "dashed\n", "\(dashed.stderrText)")
        #expect(try CLIProcess.run(["get", "--", "-dash"], socket: s).stdoutText == "dashed\n")
        #expect(try CLIProcess.run(["lease", "a", "--key", "b", "--", "true"], socket: s).status == 2)
        #expect(try CLIProcess.run(["lease", "--", "true"], socket: s).status == 2)

        // Held by a client that stays connected: exit 3 after the wait, nothing runs.
        let holder = try daemon.client()
        let token = try #require(try holder.result("cache.lease", #"{"key":"busy","ttl":{"seconds":60}}"#)["lease"]?.string)
        let held = try CLIProcess.run(["lease", "busy", "--wait", "0", "--", "sh", "-c", "echo ran"], socket: s)
        #expect(held.status == 3 && held.stdout.isEmpty)
        #expect(try CLIProcess.run(["release", "busy", token], socket: s).status == 0)
        #expect(try CLIProcess.run(["release", "busy", token], socket: s).status == 1)
    }

    /// Every row of the table in Docs/DURATIONS.md, through the daemon's parser (the CLI
    /// uses the same `HumanDuration`).
    @Test func durationTableHolds() throws {
        let doc = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Docs/DURATIONS.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        var rows = 0
        for line in text.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count >= 3 else { continue }
            let input = String(cells[1].dropFirst().dropLast())
            let expected = cells[2]
            rows += 1
            switch HumanDuration.seconds(input) {
            case .success(let seconds):
                #expect(expected == String(seconds) || Double(expected) == seconds, "\(input): got \(seconds)")
            case .failure:
                #expect(expected == "refused", "\(input): refused, the table says \(expected)")
            }
        }
        #expect(rows > 20)
    }
}
