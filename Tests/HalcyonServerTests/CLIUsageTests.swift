// What a careful first user of the `halcyon` command meets: negative numbers as
// arguments, help texts that agree with the commands, exit statuses and error lines that
// match the docs, expiries shown as set, and lifetimes that reach the daemon.

import Foundation
import HalcyonJSON
import Testing

@Suite("halcyon CLI usage", .timeLimit(.minutes(1)))
struct CLIUsageTests {
    @Test func negativeNumbersAreArguments() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        #expect(try CLIProcess.run(["incr", "n", "-3"], socket: s).stdoutText == "-3\n")
        #expect(try CLIProcess.run(["incr", "n", "-3", "--ttl", "1h"], socket: s).stdoutText == "-6\n")
        #expect(try CLIProcess.run(["decr", "n", "-2"], socket: s).stdoutText == "-4\n")
        #expect(try CLIProcess.run(["incr", "--initial", "-10", "m", "-1"], socket: s).stdoutText == "-11\n")
        #expect(try CLIProcess.run(["incr", "fresh", "--initial", "-10"], socket: s).stdoutText == "-9\n")
        #expect(try CLIProcess.run(["-v", "set", "v", "-5", "--memory-ttl", "1h", "--ttl", "2h"], socket: s).status == 0)
        #expect(try CLIProcess.run(["get", "v"], socket: s).stdoutText == "-5")
        #expect(try CLIProcess.run(["set", "w", "-2.5"], socket: s).status == 0)
        #expect(try CLIProcess.run(["get", "w"], socket: s).stdoutText == "-2.5")
        // `keys -0` is still the NUL flag, not a number.
        #expect(try CLIProcess.run(["keys", "-0", "n"], socket: s).stdout == Array("n\0".utf8))
        // Anything else that starts with '-' needs '--', and the error says so.
        let dashed = try CLIProcess.run(["get", "-k"], socket: s)
        let unknown = try CLIProcess.run(["set", "k", "-v2"], socket: s)
        #expect(unknown.status == 2 && unknown.stderrText.contains("goes after '--'"), "\(unknown.stderrText)")
        #expect(dashed.status == 2)
        #expect(dashed.stderrText.hasPrefix("halcyon: usage: "))
        #expect(dashed.stderrText.contains("goes after '--'"), "\(dashed.stderrText)")
        #expect(try CLIProcess.run(["set", "--", "-k", "-v"], socket: s).status == 0)
        #expect(try CLIProcess.run(["get", "--", "-k"], socket: s).stdoutText == "-v")
    }

    @Test func helpTextsAgreeWithTheCommands() throws {
        let cas = try CLIProcess.run(["cas", "--help"])
        #expect(cas.status == 0)
        #expect(!cas.stdoutText.contains("get -v"))
        #expect(cas.stdoutText.contains("describe"))
        let release = try CLIProcess.run(["release", "--help"])
        #expect(release.status == 0)
        #expect(!release.stdoutText.contains("'lease' printed"))
        #expect(release.stdoutText.contains("never prints its token"))
        let root = try CLIProcess.run(["--help"])
        let summary = root.stdoutText.replacingOccurrences(of: "\n", with: " ")
        for word in ["add", "cas", "rm-prefix", "release", "3 when another caller", "loop"] {
            #expect(summary.contains(word), "\(word)")
        }
        let nosuch = try CLIProcess.run(["help", "nosuch"])
        #expect(nosuch.status == 2)
        #expect(nosuch.stderrText == "halcyon: usage: unknown command 'nosuch'; see 'halcyon --help'\n")
        #expect(try CLIProcess.run(["help", "get"]).status == 0)
    }

    @Test func rmPrefixMissPrintsNothing() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let miss = try CLIProcess.run(["rm-prefix", "none:"], socket: daemon.socketPath)
        #expect(miss.status == 1 && miss.stdout.isEmpty && miss.stderr.isEmpty)
    }

    @Test func aFreshTenMinuteEntryShowsTenMinutes() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        // The daemon rounds a stored expiry up to the next whole second; set just after a
        // second begins, where rounding the time left to nearest shows `10m 1s`. Only a
        // sleep can wait for the clock.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        usleep(useconds_t((1_000_000_000 - now.tv_nsec) / 1000 + 2000))
        #expect(try CLIProcess.run(["set", "k", "v", "--ttl", "10m"], socket: daemon.socketPath).status == 0)
        let text = try CLIProcess.run(["describe", "k"], socket: daemon.socketPath).stdoutText
        #expect(text.contains("expires:     in 10m ("), "\(text)")
    }

    @Test func leaseNamesACommandThatIsNotAProgram() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let run = try CLIProcess.run(["lease", "k", "--", "halcyon_no_such_function"], socket: daemon.socketPath)
        #expect(run.status == 127)
        #expect(run.stderrText.hasPrefix("halcyon: cannotRun: 'halcyon_no_such_function' is not a program on PATH"))
        #expect(run.stderrLines.count == 1)
        // Nothing was cached and the lease is free again.
        #expect(try CLIProcess.run(["get", "k"], socket: daemon.socketPath).status == 1)
        let ran = try CLIProcess.run(["lease", "k", "--wait", "0", "--", "sh", "-c", "printf ok"], socket: daemon.socketPath)
        #expect(ran.status == 0 && ran.stdoutText == "ok")
    }

    @Test func lifetimesWithoutDiskAndIncrMemoryTTL() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        func described(_ key: String) throws -> JSONValue {
            try JSONValue.parse(CLIProcess.run(["describe", key, "--json"], socket: s).stdout).get()
        }
        let now = Date().timeIntervalSince1970
        // Without a disk copy, --ttl is the entry's lifetime (not the 300 s memory default).
        #expect(try CLIProcess.run(["set", "m", "v", "--no-disk", "--ttl", "1h"], socket: s).status == 0)
        let memoryOnly = try #require(try described("m")["expiresAt"]?.double)
        #expect(abs(memoryOnly - (now + 3600)) < 30, "\(memoryOnly - now)")
        #expect(try CLIProcess.run(["incr", "c", "--no-disk", "--ttl", "1h"], socket: s).stdoutText == "1\n")
        let counter = try #require(try described("c")["expiresAt"]?.double)
        #expect(abs(counter - (now + 3600)) < 30, "\(counter - now)")
        // incr takes a memory lifetime as set does.
        #expect(try CLIProcess.run(["incr", "d", "--memory-ttl", "90"], socket: s).stdoutText == "1\n")
        let resident = try #require(try described("d")["memoryExpiresAt"]?.double)
        #expect(abs(resident - (now + 90)) < 30, "\(resident - now)")
    }

    @Test func touchZeroExpiresTheKeyNow() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let s = daemon.socketPath
        #expect(try CLIProcess.run(["set", "k", "v"], socket: s).status == 0)
        let touched = try CLIProcess.run(["touch", "k", "0"], socket: s)
        #expect(touched.status == 0, "\(touched.stderrText)")
        #expect(try CLIProcess.run(["get", "k"], socket: s).status == 1)
        // Zero stays refused where it would store an already expired value.
        #expect(try CLIProcess.run(["set", "k", "v", "--ttl", "0"], socket: s).status == 2)
    }
}
