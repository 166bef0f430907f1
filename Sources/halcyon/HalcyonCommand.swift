// The root of the command tree: its name, help and the list of subcommands.

import ArgumentParser
import HalcyonVersion

/// `halcyon`: the command-line client of `halcyond`.
///
/// Only parsed, never run: `CLIMain` runs the chosen subcommand, so that exit codes are
/// ours (0 hit, 1 miss, 2 error) rather than ArgumentParser's.
struct HalcyonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "halcyon",
        abstract: "Talk to the Halcyon cache daemon (halcyond) from the shell.",
        discussion: """
            Exit status: 0 on success or a hit; 1 on a miss, printing nothing (get, exists, \
            describe, rm, touch and rm-prefix found no key, add and cas did not store, release \
            found no such lease); 2 on any error, with one line on stderr, \
            'halcyon: <reason>: <message>'; lease only: 3 when another caller still held the \
            lease after --wait, else COMMAND's own status (127 when it is not a program).

            Negative numbers are arguments ('halcyon incr n -3'); a key or value that starts \
            with '-' goes after '--' ('halcyon set -- -k -v'). For many commands from one \
            script, 'halcyon loop' reads them one per line over one connection.

            Every command also takes --socket <path> (else $HALCYON_SOCKET, else the first \
            socket of $XDG_RUNTIME_DIR/halcyon/halcyon.sock, /run/user/<euid>/halcyon/halcyon.sock, \
            /tmp/halcyon-<euid>/halcyon.sock, /run/halcyon/halcyon.sock), \
            --timeout <seconds> (default 30) and -v/--verbose, before or after its name.
            """,
        version: HalcyonVersion.current,
        subcommands: [
            GetCommand.self, SetCommand.self, RemoveCommand.self, ExistsCommand.self,
            DescribeCommand.self, TouchCommand.self, StatsCommand.self, InfoCommand.self, WhoamiCommand.self,
            PingCommand.self, ClearCommand.self, TrimCommand.self, RemoveExpiredCommand.self,
            SizeCommand.self, CallCommand.self, MetricsCommand.self, AddCommand.self, IncrementCommand.self,
            DecrementCommand.self, CompareAndSetCommand.self, KeysCommand.self, RemovePrefixCommand.self,
            LeaseCommand.self, ReleaseCommand.self, LoopCommand.self, TopCommand.self,
        ])
}
