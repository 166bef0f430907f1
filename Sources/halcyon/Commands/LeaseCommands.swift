// Leases from scripts: `lease KEY --ttl D [--wait D]` reads the key or takes the right
// to compute it; `release KEY TOKEN` gives that right back. A script that computes
// stores with `halcyon set KEY VALUE --lease TOKEN` (or `add`).

import ArgumentParser
import HalcyonJSON

/// `halcyon lease KEY --ttl D [--wait D]`.
///
/// Exit 0: a hit; the value's bytes are on stdout (as `get`). Exit 1: a miss, and this
/// caller holds the lease; its token is on stdout. Exit 3: another caller still holds the
/// lease after `--wait`. Exit 2: an error.
struct LeaseCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "lease",
        abstract: "Read KEY, or take the lease to compute it (exit 0 value, 1 token, 3 still leased).",
        discussion: """
            Exit 0: the value's bytes are on stdout. Exit 1: a miss and you hold the lease: \
            its token is on stdout; compute the value and store it with 'set KEY VALUE --lease TOKEN', \
            or give it back with 'release KEY TOKEN'. Exit 3: another caller holds the lease and \
            --wait ran out. The lease ends after --ttl, at any write of the key, or when released.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Option(help: ArgumentHelp("How long the lease holds if taken.", valueName: "duration")) var ttl: String
    @Option(help: ArgumentHelp("How long to wait for another holder's value (default 0).", valueName: "duration"))
    var wait: String?

    func execute(_ context: CommandContext) throws(CLIError) {
        let lease: Double
        do { lease = try Durations.seconds(ttl) } catch { throw .usage("--ttl: \(error.description)") }
        var waitSeconds = 0.0
        if let wait {
            do { waitSeconds = try Durations.secondsOrZero(wait) } catch { throw .usage("--wait: \(error.description)") }
        }
        let result = try context.connect().call("cache.lease") { writer in
            writer.key("key"); writer.string(key)
            writer.key("ttl"); Expiration.seconds(lease).write(to: &writer)
            if waitSeconds > 0 { writer.key("wait"); writer.double(waitSeconds) }
            writer.key("encoding"); writer.string("base64")
        }
        if result["found"]?.bool == true {
            guard let text = result["value"]?.stringBytes, let bytes = StrictBase64.decode(text) else {
                throw .badReply("the value is not base64")
            }
            Output.value(bytes)
            return
        }
        if let token = result["lease"]?.string {
            Output.line(token)
            throw .miss
        }
        throw .leased
    }
}

/// `halcyon release KEY TOKEN`: gives a lease back (exit 1 if it had already ended).
struct ReleaseCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "release", abstract: "Give back a lease taken with 'lease' (exit 1 if it had already ended).")

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Argument(help: "The key.") var key: String
    @Argument(help: "The token 'lease' printed.") var token: String

    func execute(_ context: CommandContext) throws(CLIError) {
        let result = try context.connect().call("cache.releaseLease") { writer in
            writer.key("key"); writer.string(key)
            writer.key("lease"); writer.string(token)
        }
        guard result["released"]?.bool == true else { throw .miss }
    }
}
