// The terminal while `halcyon top` draws on it: cbreak mode, the alternate screen, the
// keys and signals that end or redraw the view, and putting everything back on every
// way out.

import CHalcyonSystem
#if canImport(Glibc)
import Glibc
#endif

/// Owns the terminal for the live view.
///
/// `init` saves the terminal's settings, switches to cbreak mode (keys arrive at once,
/// unechoed; Ctrl-C still raises SIGINT) and to the alternate screen, and routes the
/// signals that would end or stop the process to a descriptor (`signalfd`), so they
/// arrive in `wait` as events instead of killing the process with the terminal still in
/// cbreak mode. `restore` undoes all of it and is called on every way out: `q`, a
/// signal (`TopCommand` then re-raises it with its default action, so the shell sees
/// the process end by that signal), an error, and Ctrl-Z (restored while stopped,
/// re-entered on continue). Only SIGKILL leaves the terminal as it was while drawing.
///
/// Threading: main thread only, like the rest of the CLI.
final class TopTerminal {
    /// What ended a wait.
    enum Event: Equatable {
        /// The deadline passed: time to refresh.
        case tick
        /// `q` was pressed, or input ended.
        case quit
        /// The window changed size, or the process continued after a stop: draw again.
        case redraw
        /// A signal that ends the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT).
        case terminate(Int32)
    }

    /// The signals read from `signalFD` instead of acting on the process.
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGCONT, SIGWINCH]

    private let input = STDIN_FILENO
    private let output = STDOUT_FILENO
    private var saved: [UInt8]
    private let signalFD: Int32
    /// Whether the terminal is in the view's state now (cbreak, alternate screen).
    private var isActive = false

    /// Takes over the terminal.
    /// - Throws: `CLIError.input` (`notATerminal`) when stdin cannot be put in cbreak
    ///   mode, or the signals cannot be routed; nothing is changed then.
    init() throws(CLIError) {
        saved = [UInt8](repeating: 0, count: hc_terminal_saved_size())
        let descriptor = Self.signals.withUnsafeBufferPointer { hc_signals_to_fd($0.baseAddress, Int32($0.count)) }
        guard descriptor >= 0 else {
            throw .input(reason: "cannotUseTerminal", message: "cannot route signals: \(String(cString: strerror(errno)))")
        }
        signalFD = descriptor
        do {
            try enter()
        } catch {
            Self.signals.withUnsafeBufferPointer { hc_signals_unblock($0.baseAddress, Int32($0.count)) }
            close(signalFD)
            throw error
        }
    }

    deinit {
        restore()
        close(signalFD)
    }

    /// Cbreak mode, the alternate screen, the cursor hidden.
    private func enter() throws(CLIError) {
        let result = saved.withUnsafeMutableBytes { hc_terminal_enter_cbreak(input, $0.baseAddress) }
        guard result == 0 else {
            throw .input(reason: "notATerminal", message: "the live view needs a terminal on stdin (\(String(cString: strerror(errno)))); use --lines")
        }
        isActive = true
        write("\u{1B}[?1049h\u{1B}[?25l\u{1B}[H\u{1B}[2J")
    }

    /// Puts the terminal back as it was: the cursor shown, the main screen, the saved
    /// settings. Safe to call more than once.
    func restore() {
        guard isActive else { return }
        isActive = false
        write("\u{1B}[0m\u{1B}[?25h\u{1B}[?1049l")
        _ = saved.withUnsafeBytes { hc_terminal_restore(input, $0.baseAddress) }
    }

    /// Ends the process by `signal` with its default action, the terminal restored
    /// first, so a shell loop around `halcyon top` sees the interrupt.
    func endBy(_ signal: Int32) -> Never {
        restore()
        Glibc.signal(signal, SIG_DFL)
        raise(signal)
        [signal].withUnsafeBufferPointer { hc_signals_unblock($0.baseAddress, 1) }
        exit(128 + signal)
    }

    /// The window's size: (rows, columns); 24×80 when it cannot be read.
    var size: (rows: Int, columns: Int) {
        var rows: Int32 = 0
        var columns: Int32 = 0
        guard hc_terminal_size(output, &rows, &columns) == 0, rows > 0, columns > 0 else { return (24, 80) }
        return (Int(rows), Int(columns))
    }

    /// Draws `rows` from the top left, clearing what each row and the rest of the
    /// screen held before. No line feed after the last row, so the screen never scrolls.
    func draw(_ rows: [TopScreen.Row], width: Int) {
        var text = "\u{1B}[H"
        for (index, row) in rows.enumerated() {
            switch row.style {
            case .plain: text += row.text + "\u{1B}[K"
            case .title:
                let padding = String(repeating: " ", count: max(0, width - row.text.count))
                text += "\u{1B}[7m" + row.text + padding + "\u{1B}[0m"
            case .heading: text += "\u{1B}[1m" + row.text + "\u{1B}[0m\u{1B}[K"
            case .alert: text += "\u{1B}[1;31m" + row.text + "\u{1B}[0m\u{1B}[K"
            }
            if index < rows.count - 1 { text += "\r\n" }
        }
        write(text + "\u{1B}[J")
    }

    /// Waits for a key, a signal or `deadline` (monotonic seconds), whichever is first.
    /// Keys other than `q` are read and ignored.
    func wait(until deadline: Double) -> Event {
        while true {
            let remaining = deadline - TopSample.monotonicSeconds()
            if remaining <= 0 { return .tick }
            var descriptors = [pollfd(fd: signalFD, events: Int16(POLLIN), revents: 0),
                               pollfd(fd: input, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&descriptors, 2, Int32(min(remaining * 1000, 60_000).rounded(.up)))
            if ready < 0 {
                if errno == EINTR { continue }
                return .quit
            }
            if descriptors[0].revents != 0, let event = signalEvent() { return event }
            if descriptors[1].revents != 0 {
                var bytes = [UInt8](repeating: 0, count: 64)
                let count = bytes.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if count == 0 || (count < 0 && errno != EINTR && errno != EAGAIN) { return .quit }
                if count > 0, bytes[0..<count].contains(where: { $0 == UInt8(ascii: "q") || $0 == UInt8(ascii: "Q") }) {
                    return .quit
                }
            }
        }
    }

    /// The event of the signals read now, or nil when there were none that matter.
    private func signalEvent() -> Event? {
        var event: Event?
        while case let signal = hc_signalfd_next(signalFD), signal != 0 {
            switch signal {
            case SIGWINCH, SIGCONT: event = event ?? .redraw
            case SIGTSTP: suspend(); event = event ?? .redraw
            default: return .terminate(signal)
            }
        }
        return event
    }

    /// Ctrl-Z: the terminal restored while the process is stopped, taken again when it
    /// continues (`fg`).
    private func suspend() {
        restore()
        raise(SIGSTOP)
        try? enter()
    }

    private func write(_ text: String) {
        Output.stdout(Array(text.utf8))
    }
}
