// `halcyon loop`: many commands, one process and one connection. Reads one command per
// line on stdin and answers one line each on stdout, so a shell script (a bash
// coprocess, Clients/shell/halcyon.sh) pays for a process start once instead of per call.

import ArgumentParser
#if canImport(Glibc)
import Glibc
#endif

/// Runs each stdin line as a `halcyon` command over one connection and writes one reply
/// line per request line, in order, until stdin ends (exit 0).
///
/// Request: `[@TAG] COMMAND [ARGS…]`, the words of a command line (what follows
/// `halcyon`), quoted by `LineEscaping`'s rule. Reply: `[@TAG] STATUS[ PAYLOAD]`, where
/// STATUS is the exit status the command would have had on its own (0, 1, 2) and PAYLOAD
/// is, escaped, what it would have printed: its stdout for 0 and 1, its error line
/// (`reason: message`) for 2. A tag, any word starting with `@`, is echoed so a reader
/// can match replies to requests.
struct LoopCommand: HalcyonSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "loop",
        abstract: "Read commands from stdin, one per line, and answer one line each (one process, one connection).",
        discussion: """
            Each line is a command as it would follow 'halcyon' ('get k', 'set k v --ttl 10m'); \
            words are separated by spaces, and in a word \\\\ \\n \\r \\t and \\xHH (\\x20 for a \
            space) stand for those bytes, "" for an empty word. Each reply is one line: the \
            command's exit status, then a space and what it printed (its error line for \
            status 2), escaped the same way. A first word starting with '@' is a tag, \
            echoed first in the reply. 'lease' and values from stdin are not available \
            here. A command that was in flight when the daemon went away answers \
            connectionClosed; the next command connects again. Ends at the end of stdin.
            """)

    @OptionGroup(title: "Global options") var global: GlobalOptions

    func execute(_ context: CommandContext) throws(CLIError) {
        guard context.session == nil else { throw .usage("'loop' does not run inside 'halcyon loop'") }
        let session = LoopSession(socketPath: context.socketPath, timeout: context.timeout, verbose: context.verbose)
        var reader = LineReader(fd: STDIN_FILENO)
        while let line = try reader.next() {
            context.output.write(Self.reply(to: line, session: session))
        }
    }

    /// Runs one request line and returns its reply line (with its line feed).
    static func reply(to line: [UInt8], session: LoopSession) -> [UInt8] {
        var reply: [UInt8] = []
        var words: [[UInt8]]
        do {
            words = try LineEscaping.words(line)
        } catch {
            finish(&reply, status: 2, payload: Array("usage: \(error.message)".utf8))
            return reply
        }
        if let first = words.first, first.first == UInt8(ascii: "@") {
            LineEscaping.escape(first, into: &reply, asWord: true)
            reply.append(UInt8(ascii: " "))
            words.removeFirst()
        }
        guard !words.isEmpty else {
            finish(&reply, status: 2, payload: Array("usage: missing command".utf8))
            return reply
        }
        let output = CommandOutput.capture()
        let outcome = CLIMain.execute(ArgumentWords(words), environment: [:], output: output, session: session)
        finish(&reply, status: outcome.status, payload: outcome.errorLine.map { Array($0.utf8) } ?? output.captured)
        return reply
    }

    /// Appends `STATUS[ PAYLOAD]\n`.
    private static func finish(_ reply: inout [UInt8], status: Int32, payload: [UInt8]) {
        reply.append(contentsOf: String(status).utf8)
        if !payload.isEmpty {
            reply.append(UInt8(ascii: " "))
            LineEscaping.escape(payload, into: &reply)
        }
        reply.append(UInt8(ascii: "\n"))
    }
}

/// Reads a file descriptor line by line without Foundation's buffering.
///
/// Threading: not thread-safe; a value owned by the loop.
struct LineReader {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private var ended = false
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    init(fd: Int32) {
        self.fd = fd
    }

    /// The next line without its line feed; a last line without one counts too. Nil at the end.
    /// - Throws: `CLIError.input(reason: "cannotReadStdin")` when a read fails.
    mutating func next() throws(CLIError) -> [UInt8]? {
        var searchFrom = start
        while true {
            if let newline = buffer[searchFrom...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[start..<newline])
                start = newline + 1
                return line
            }
            if ended {
                guard start < buffer.count else { return nil }
                let line = Array(buffer[start...])
                start = buffer.count
                return line
            }
            // Drop what was consumed before reading more, so a long session does not grow.
            if start > 0 {
                buffer.removeSubrange(..<start)
                start = 0
            }
            searchFrom = buffer.count
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .input(reason: "cannotReadStdin", message: String(cString: strerror(errno)))
            }
            if count == 0 { ended = true } else { buffer.append(contentsOf: chunk[..<count]) }
        }
    }
}
