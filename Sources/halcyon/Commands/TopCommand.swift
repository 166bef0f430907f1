// `halcyon top`: the daemon's activity, refreshed every interval: a live view on a
// terminal, one line per refresh for logs.

import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

/// Shows requests a second by method, hit ratios, latency quantiles, tier sizes against
/// their limits, evictions and expirations, the journal's backlog, connections and the
/// upstream's nodes, with rates taken between two refreshes.
///
/// Three ways to run:
/// - on a terminal, a live view until `q`, Ctrl-C or a signal (`TopTerminal` restores the
///   terminal on every way out); a lost daemon shows as a status row, and the view picks
///   up again when a daemon answers on the socket;
/// - `--lines`, or stdout not a terminal: one line per refresh, until interrupted; a lost
///   daemon ends it with the usual error line (status 2);
/// - `--once`: one refresh (two samples an interval apart), printed as the screen's text
///   (`--lines`: as one line), then exit.
///
/// Each refresh reads `server.metrics` (per-method counts and latency histograms),
/// `cache.stats` and `server.info`; those three calls are left out of the request rates.
struct TopCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "top",
        abstract: "Watch the daemon live: requests a second by method, hit ratio, latency, sizes, backlog.",
        discussion: """
            Rates are the counters' growth between two refreshes. On a terminal the view \
            redraws every --interval until 'q' or Ctrl-C; when stdout is not a terminal, or \
            with --lines, it prints one line per refresh instead. --once prints one refresh \
            and exits. The view's own three requests a refresh are not counted. A daemon \
            that does not answer within twice the interval (at least 2s, at most --timeout) \
            counts as lost.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions
    @Option(help: ArgumentHelp("Seconds between refreshes, or a duration such as 500ms, 2s (default 1).", valueName: "seconds"))
    var interval: String?
    @Flag(help: "Print one line per refresh (for logs), even on a terminal.")
    var lines = false
    @Flag(help: "Print one refresh and exit (with --lines: as one line).")
    var once = false

    /// The shortest interval: a refresh costs the daemon three requests and a metrics render.
    static let minimumInterval = 0.1

    func execute(_ context: CommandContext) throws(CLIError) {
        guard context.session == nil else { throw .usage("'top' does not run inside 'halcyon loop'") }
        var seconds = 1.0
        if let interval {
            do { seconds = try Durations.seconds(interval) } catch { throw .usage("--interval: \(error.description)") }
            guard seconds >= Self.minimumInterval else {
                throw .usage("--interval: at least \(Durations.describe(Self.minimumInterval))")
            }
        }
        // A daemon that does not answer for twice the interval (at least 2 s) counts as
        // lost, so the view never freezes for a whole --timeout.
        let timeout = min(context.timeout, max(2 * seconds, 2))
        if once {
            try printOnce(context, interval: seconds, timeout: timeout)
        } else if lines || isatty(STDOUT_FILENO) != 1 {
            try printLines(context, interval: seconds, timeout: timeout)
        } else {
            try live(context, interval: seconds, timeout: timeout)
        }
    }

    /// Two samples an interval apart, printed once.
    private func printOnce(_ context: CommandContext, interval: Double, timeout: Double) throws(CLIError) {
        let connection = try Connection(path: context.socketPath, timeout: timeout)
        let first = try TopSample.take(connection)
        Self.sleep(until: first.time + interval)
        let second = try TopSample.take(connection)
        let view = TopView(from: first, to: second)
        if lines {
            context.output.line(TopScreen.line(view, clock: Durations.now()))
        } else {
            let rows = TopScreen.rows(view: view, sample: nil, status: nil, interval: interval, clock: Durations.now(),
                                      width: 80, height: Int.max)
            context.output.line(rows.map(\.text).joined(separator: "\n"))
        }
    }

    /// One line per refresh until interrupted or the daemon is lost.
    private func printLines(_ context: CommandContext, interval: Double, timeout: Double) throws(CLIError) {
        let connection = try Connection(path: context.socketPath, timeout: timeout)
        var previous = try TopSample.take(connection)
        while true {
            Self.sleep(until: previous.time + interval)
            let sample = try TopSample.take(connection)
            context.output.line(TopScreen.line(TopView(from: previous, to: sample), clock: Durations.now()))
            previous = sample
        }
    }

    /// The full-screen view, until `q` or a signal.
    private func live(_ context: CommandContext, interval: Double, timeout: Double) throws(CLIError) {
        let terminal = try TopTerminal()
        var connection: Connection?
        var previous: TopSample?
        var view: TopView?
        var status: String?
        var next = TopSample.monotonicSeconds()
        while true {
            if TopSample.monotonicSeconds() >= next {
                next += interval * ((TopSample.monotonicSeconds() - next) / interval).rounded(.down) + interval
                do throws(CLIError) {
                    let open: Connection
                    if let connection, !connection.isBroken {
                        open = connection
                    } else {
                        open = try Connection(path: context.socketPath, timeout: timeout)
                        connection = open
                    }
                    let sample = try TopSample.take(open)
                    // Another daemon on the socket (a restart) has counters of its own.
                    if let previous, previous.pid == sample.pid, previous.startedAt == sample.startedAt {
                        view = TopView(from: previous, to: sample)
                    } else {
                        view = nil
                    }
                    previous = sample
                    status = nil
                } catch {
                    connection = nil
                    previous = nil
                    status = "lost the daemon: \(error.line ?? "no answer"); trying again every \(Durations.describe(interval))"
                }
            }
            let size = terminal.size
            terminal.draw(TopScreen.rows(view: view, sample: previous, status: status, interval: interval,
                                         clock: Durations.now(), width: size.columns, height: size.rows),
                          width: size.columns)
            switch terminal.wait(until: next) {
            case .tick, .redraw: continue
            case .quit:
                terminal.restore()
                return
            case .terminate(let signal):
                terminal.endBy(signal)
            }
        }
    }

    /// Sleeps until `deadline` (monotonic seconds).
    private static func sleep(until deadline: Double) {
        while case let remaining = deadline - TopSample.monotonicSeconds(), remaining > 0 {
            _ = poll(nil, 0, Int32((remaining * 1000).rounded(.up)))
        }
    }
}
