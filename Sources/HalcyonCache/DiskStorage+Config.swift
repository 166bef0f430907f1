// The disk tier's configuration: where the folder lives, how names are made, how long
// entries live, and the collaborators (clock, scan hook) tests inject.

import Foundation

extension DiskStorage {
    /// Everything a `DiskStorage.Backend` is built from. A value type: the backend copies
    /// it at init and reads it behind its `configLock`.
    ///
    /// `name` and `directory` are read once, at init, to fix `Backend.directoryURL`;
    /// changing them later through `Backend.config` has no effect.
    public struct Config: Sendable {
        /// The cache folder's name under `directory`. Default `"default"`.
        public var name: String
        /// The most bytes the folder may hold before `removeSizeExceededValues()` trims it;
        /// `0` means unlimited. Counted in file bytes (value, key and the 48-byte header).
        public var sizeLimit: UInt64
        /// The expiration of a stored value when `store` is not given one. Default 7 days.
        public var expiration: StorageExpiration = .days(7)
        /// An extension added to every file name (`<name>.<ext>`). Default nil.
        public var pathExtension: String? = nil
        /// Name files by the lowercase hex SHA-256 of the key's UTF-8 bytes (default true).
        /// When false the key itself is the file name, so it must be a safe single name
        /// (see `Backend.validate(key:)`).
        public var usesHashedFileName = true
        /// With hashed names and no `pathExtension`, keep the key's own extension (the
        /// text after the last `.` of its last path component, up to 16 alphanumerics),
        /// so tools can tell file types apart. Default false.
        public var autoExtAfterHashedFileName = false
        /// The root folder; nil means `$XDG_CACHE_HOME/halcyon` (when that is an absolute
        /// path), else `~/.cache/halcyon`.
        public var directory: URL?
        /// Where "now" comes from for every expiration and last-access decision.
        /// Default `SystemClock()`.
        public var clock: any CacheClock = SystemClock()
        /// fsync the temporary file before renaming it into place, and the folder after,
        /// so a stored value survives a power loss. Off by default: a cache can lose
        /// values, and the flush costs several milliseconds per store on this machine
        /// (see DiskStorage.swift).
        public var synchronousWrites = false
        /// Test hook: called on the initial-scan queue before the folder is listed.
        /// A test blocks in it to show that requests are answered while the scan is held.
        /// Default nil.
        public var initialScanWillStart: (@Sendable () -> Void)? = nil

        /// Creates a configuration.
        /// - Parameters:
        ///   - name: the cache folder's name under `directory` (default `"default"`).
        ///   - sizeLimit: the trim threshold in bytes; 0 (default) = unlimited.
        ///   - directory: the root folder; nil (default) = the XDG cache folder.
        public init(name: String = "default", sizeLimit: UInt64 = 0, directory: URL? = nil) {
            self.name = name
            self.sizeLimit = sizeLimit
            self.directory = directory
        }

        /// The root folder this config resolves to.
        var resolvedRoot: URL {
            if let directory { return directory }
            let environment = ProcessInfo.processInfo.environment
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("halcyon", isDirectory: true)
            }
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            return URL(fileURLWithPath: home, isDirectory: true)
                .appendingPathComponent(".cache", isDirectory: true)
                .appendingPathComponent("halcyon", isDirectory: true)
        }
    }
}
