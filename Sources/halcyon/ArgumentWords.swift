// The words of one command as bytes: from the process's argv, or from one line of
// `halcyon loop`. ArgumentParser takes Strings, and a String cannot hold bytes that are
// not UTF-8, so such a word travels through it as a stand-in that maps back to its bytes.

#if canImport(Glibc)
import Glibc
#endif
import HalcyonJSON

/// One command's words: the Strings ArgumentParser parses, and the exact bytes of every
/// word that is not valid UTF-8.
///
/// A word that is valid UTF-8 is its own String. Any other word becomes a stand-in
/// (U+FFFF, a noncharacter no text holds, then its index) that `bytes(of:)` turns back
/// into the bytes. Only a value (`set`'s VALUE, `lease`'s COMMAND) may be such a word:
/// keys, prefixes and options are text on the wire, and `CLIMain` refuses a stand-in
/// anywhere else rather than send it.
///
/// Threading: a value; the CLI is single-threaded.
struct ArgumentWords {
    /// The words as ArgumentParser takes them.
    private(set) var strings: [String] = []
    /// The bytes of each stand-in in `strings`.
    private var raw: [String: [UInt8]] = [:]

    init(_ words: [[UInt8]]) {
        for bytes in words {
            if isValidUTF8(bytes) {
                strings.append(String(decoding: bytes, as: UTF8.self))
            } else {
                let standIn = "\u{FFFF}\(raw.count)"
                raw[standIn] = bytes
                strings.append(standIn)
            }
        }
    }

    /// The words after the program name in the process's argv, byte for byte (Swift's
    /// `CommandLine.arguments` would replace bytes that are not UTF-8).
    static func processArguments() -> ArgumentWords {
        var words: [[UInt8]] = []
        let argv = CommandLine.unsafeArgv
        for index in 1..<Int(CommandLine.argc) {
            guard let word = argv[index] else { continue }
            words.append(Array(UnsafeRawBufferPointer(start: word, count: strlen(word))))
        }
        return ArgumentWords(words)
    }

    /// The exact bytes of `word`, a String parsed out of `strings`.
    func bytes(of word: String) -> [UInt8] {
        raw[word] ?? Array(word.utf8)
    }

    /// Whether `word` stands for bytes that are not UTF-8.
    func isStandIn(_ word: String) -> Bool {
        raw[word] != nil
    }

    /// The stand-ins, in no order.
    var standIns: Dictionary<String, [UInt8]>.Keys { raw.keys }
}

/// The environment variables the CLI reads, taken once at start.
enum ProcessEnvironment {
    /// Every name the CLI looks at; reading these few is cheaper than copying the whole
    /// environment into a dictionary.
    static let names = ["HALCYON_SOCKET", "XDG_RUNTIME_DIR"]

    static func read() -> [String: String] {
        var environment: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return environment
    }
}
