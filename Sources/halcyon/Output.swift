// Writing to the standard streams without Foundation's buffering, so binary values go
// out byte for byte and an error line never lands in the middle of a value.

#if canImport(Glibc)
import Glibc
#endif

/// Raw writes to stdout/stderr and the read of stdin.
///
/// Threading: the CLI is single-threaded; these are called only from the main thread.
enum Output {
    /// Writes all of `bytes` to `fd`, retrying short writes and EINTR. A closed pipe on
    /// stdout ends the process through the default SIGPIPE, as `cat` does.
    static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }

    /// Writes `bytes` to stdout as they are.
    static func stdout(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0, to: STDOUT_FILENO) }
    }

    /// Writes `text` and a line feed to stdout.
    static func line(_ text: String) {
        stdout(Array((text + "\n").utf8))
    }

    /// Writes the one `halcyon: …` error line to stderr.
    static func error(_ text: String) {
        let bytes = Array("halcyon: \(text)\n".utf8)
        bytes.withUnsafeBytes { write($0, to: STDERR_FILENO) }
    }

    /// Whether stdin is a terminal (nothing piped in).
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    /// Reads stdin to its end.
    /// - Throws: `CLIError.input` when the read fails.
    static func readStandardInput() throws(CLIError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count == 0 { return result }
            if count < 0 {
                if errno == EINTR { continue }
                throw .input(reason: "cannotReadStdin", message: String(cString: strerror(errno)))
            }
            result.append(contentsOf: chunk[0..<count])
        }
    }
}

/// Where a command's results go: straight to stdout (one command per process), or into a
/// buffer that becomes the command's reply line (`halcyon loop`). Commands write through
/// this, never to stdout directly, so both modes print the same bytes.
///
/// Threading: not thread-safe; the CLI is single-threaded.
final class CommandOutput {
    /// The bytes written so far, when capturing; always empty otherwise.
    private(set) var captured: [UInt8] = []
    private let capturing: Bool

    private init(capturing: Bool) {
        self.capturing = capturing
    }

    /// Writes to the process's stdout.
    static func standardOutput() -> CommandOutput { CommandOutput(capturing: false) }

    /// Keeps what is written in `captured`.
    static func capture() -> CommandOutput { CommandOutput(capturing: true) }

    /// True when results go straight to the process's stdout (not into a capture), so a
    /// command may write a large value piece by piece (`writeStreamed`).
    var isStandardOutput: Bool { !capturing }

    /// Writes part of a value to stdout as it arrives; `isStandardOutput` must be true.
    func writeStreamed(_ bytes: UnsafeRawBufferPointer) {
        precondition(!capturing, "a captured output takes whole values")
        Output.write(bytes, to: STDOUT_FILENO)
    }

    /// Ends a value written by `writeStreamed` as `value` ends one: on a terminal, a line
    /// feed when its last byte is not one.
    func endStreamedValue(lastByte: UInt8?) {
        if isatty(STDOUT_FILENO) == 1, let lastByte, lastByte != UInt8(ascii: "\n") {
            write([UInt8(ascii: "\n")])
        }
    }

    /// Writes `bytes` as they are.
    func write(_ bytes: [UInt8]) {
        if capturing { captured += bytes } else { Output.stdout(bytes) }
    }

    /// Writes `text` and a line feed.
    func line(_ text: String) {
        write(Array((text + "\n").utf8))
    }

    /// Writes a value's bytes exactly; on a terminal only, adds a final line feed when
    /// the value has none, so the prompt does not land on the value's last line (as
    /// redis-cli does). Pipes, files and captures always get the exact bytes.
    func value(_ bytes: [UInt8]) {
        write(bytes)
        if !capturing, isatty(STDOUT_FILENO) == 1, !bytes.isEmpty, bytes.last != UInt8(ascii: "\n") {
            write([UInt8(ascii: "\n")])
        }
    }
}
