// How a key becomes a file name: hashed (SHA-256 hex) or the key itself, plus an
// optional extension; and which keys are refused when the key itself is the name.

import Crypto
import Foundation

extension DiskStorage {
    /// Names in the cache folder starting with this are temporary files of writes in
    /// flight (or debris of a crash). No cache file can start with it: hashed names
    /// are hex, and `validate(key:)` refuses plain keys that do.
    static let temporaryPrefix = ".tmp-"

    /// The lowercase hex SHA-256 of the key's UTF-8 bytes. Every journaled set names its
    /// file with it, so it hashes the key's own storage and writes the 64 digits straight
    /// into the string's (no intermediate arrays).
    static func sha256Hex(_ key: CacheKey) -> String {
        let digest = key.withBytes { SHA256.hash(data: $0) }
        return String(unsafeUninitializedCapacity: 64) { out in
            let digits: StaticString = "0123456789abcdef"
            let hex = digits.utf8Start
            var i = 0
            for byte in digest {
                out[i] = hex[Int(byte >> 4)]
                out[i + 1] = hex[Int(byte & 0x0f)]
                i += 2
            }
            return 64
        }
    }

    /// The extension of the key's last path component (query and fragment cut off), if
    /// it is 1...16 ASCII letters or digits; what `autoExtAfterHashedFileName` keeps.
    static func keyExtension(_ key: CacheKey) -> String? {
        var tail = Substring(key.string)
        if let cut = tail.firstIndex(where: { $0 == "?" || $0 == "#" }) { tail = tail[..<cut] }
        if let slash = tail.lastIndex(of: "/") { tail = tail[tail.index(after: slash)...] }
        guard let dot = tail.lastIndex(of: ".") else { return nil }
        let ext = tail[tail.index(after: dot)...]
        guard (1...16).contains(ext.utf8.count),
              ext.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) })
        else { return nil }
        return String(ext)
    }

    /// True when `name` can be one file name in one folder: not empty, not `.` or
    /// `..`, no `/` or NUL, at most 255 bytes (NAME_MAX), not our temporary prefix.
    static func isSafeFileName(_ name: String) -> Bool {
        let bytes = name.utf8
        return !bytes.isEmpty && bytes.count <= 255 && !bytes.elementsEqual(".".utf8) && !bytes.elementsEqual("..".utf8)
            && !bytes.contains(0x2f) && !bytes.contains(0)
            && !bytes.starts(with: temporaryPrefix.utf8)
    }
}

extension DiskStorage {
    /// Which strings a disk tier takes as keys, so a key it could never name a file with
    /// is refused before its write is acknowledged, not met by the materializer later.
    /// With hashed names (the default) every key names a file; with the key itself as the
    /// name, only a key that is one safe file name, with the configured extension too.
    ///
    /// Threading: a value; any thread.
    public struct KeyRule: Sendable, Equatable {
        /// Every key is fine: file names are hashed.
        public static let anyKey = KeyRule(plainNames: false, pathExtension: nil)

        /// True when the key itself names the file (`usesHashedFileName` false).
        public let plainNames: Bool
        /// The extension every file name gets (`Config.pathExtension`).
        public let pathExtension: String?

        public init(plainNames: Bool, pathExtension: String?) {
            self.plainNames = plainNames
            self.pathExtension = pathExtension
        }

        /// The rule of a disk tier with this configuration.
        public init(_ config: Config) {
            self.init(plainNames: !config.usesHashedFileName, pathExtension: config.pathExtension)
        }

        /// Whether `key` can name a file: always with hashed names; otherwise when the key
        /// is a safe single file name and stays one with the extension added.
        public func accepts(_ key: CacheKey) -> Bool {
            !plainNames || Self.isPlainNameSafe(key, pathExtension: pathExtension)
        }

        static func isPlainNameSafe(_ key: CacheKey, pathExtension: String?) -> Bool {
            guard DiskStorage.isSafeFileName(key.string) else { return false }
            guard let ext = pathExtension, !ext.isEmpty else { return true }
            return DiskStorage.isSafeFileName(key.string + "." + ext)
        }

        /// - Throws: `.invalidKey` when `accepts(key)` is false.
        public func check(_ key: CacheKey) throws(CacheError) {
            if !accepts(key) { throw .invalidKey(key: key) }
        }
    }
}

extension DiskStorage.Backend {
    /// The file name for a key under `config`, without checking it.
    func cacheFileName(forKey key: CacheKey, forcedExtension: String?, config: DiskStorage.Config) -> String {
        let base = config.usesHashedFileName ? DiskStorage.sha256Hex(key) : key.string
        let ext: String?
        if let chosen = forcedExtension ?? config.pathExtension {
            ext = chosen
        } else if config.usesHashedFileName && config.autoExtAfterHashedFileName {
            ext = DiskStorage.keyExtension(key)
        } else {
            ext = nil
        }
        guard let ext, !ext.isEmpty else { return base }
        return base + "." + ext
    }

    /// The file name for a key, refusing keys and extensions that cannot name one file
    /// in the cache folder.
    /// - Throws: `.invalidKey` when the key (without hashing) or the extension is unsafe.
    func checkedFileName(forKey key: CacheKey, forcedExtension: String?, config: DiskStorage.Config) throws(CacheError) -> String {
        if !config.usesHashedFileName && !DiskStorage.isSafeFileName(key.string) { throw .invalidKey(key: key) }
        let name = cacheFileName(forKey: key, forcedExtension: forcedExtension, config: config)
        // A bare SHA-256 hex name (no extension) is always one safe name.
        if config.usesHashedFileName && name.utf8.count == 64 { return name }
        guard DiskStorage.isSafeFileName(name) else { throw .invalidKey(key: key) }
        return name
    }
}
