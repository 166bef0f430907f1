// The `maybeCached` shortcut: the set of file names the folder may hold, so a miss is
// answered without a syscall. Built by a background scan at start, kept current by
// every store and removal.
//
// False positives are harmless (a disk miss); false negatives must never happen, so:
// - The start-up scan runs off the caller's thread: `init` creates the folder and
//   returns; the scan (`readdir`, stale temps deleted) runs on the backend's own serial
//   queue (one per backend, so a held scan cannot delay another). Until it ends every
//   name counts as "maybe"; stores and removals made meanwhile go to a journal (name ->
//   last operation) replayed over the scan's result (test: 5,000 files, the scan held by
//   `Config.initialScanWillStart`, a hit, a miss, a store and a remove answered while it
//   is held, all correct after). A folder that cannot be listed leaves the set
//   "everything maybe" for good.
// - A store inserts the name after its rename. A removal (remove, removeAll,
//   removeExpired, trim, touch-expired) unlinks, then erases the name only if, checked
//   under the lock with one `lstat`, the file is still absent: a store that renamed in
//   between either already inserted or inserts after (test
//   `removeAllRacingStoresNeverHidesAStoredValue`).
// - A file put in the folder behind the backend's back is not seen until a new backend
//   scans (test `aMissDoesNotTouchTheDisk`).

import Dispatch
import Foundation
import HalcyonSupport

extension DiskStorage {
    /// The names of files that may be in the cache folder, compared as bytes (`CacheKey`):
    /// with plain file names a name is its key, and two keys are two files.
    ///
    /// Invariant: a cache file that exists (and was written or seen by this process) has
    /// its name here once the call that wrote it returns. False positives are harmless
    /// (the caller looks on disk and misses); false negatives would hide values, so:
    /// - while the initial scan runs, every name "may" be cached, and mutations go to a
    ///   journal replayed over the scan's result when it ends (last operation wins);
    /// - a store inserts after its rename; a removal erases only if, under `state`'s
    ///   lock, the file is still absent: a store that renamed in between either
    ///   inserted already (then the file exists and the name stays) or inserts after.
    ///
    /// Threading: thread-safe; `state` is a `Locked` (the "maybeCached lock") held only
    /// for set operations and, in `eraseIfAbsent`, one `lstat`.
    final class KnownFileNames: Sendable {
        private enum State {
            /// The initial scan has not finished: `journal` maps each name touched since
            /// to whether it was last inserted (true) or erased (false).
            case scanning(journal: [CacheKey: Bool])
            /// The scan is done: the set is authoritative (up to false positives).
            case ready(FileNameSet)
        }

        /// The maybeCached lock and what it guards. Any thread; held only for set operations
        /// (and one `lstat` in `eraseIfAbsent`), never across a callback.
        private let state = Locked(State.scanning(journal: [:]))
        /// Left once when the initial scan ends (or is abandoned); `waitForScan` waits on it.
        private let scanDone = DispatchGroup()

        init() { scanDone.enter() }

        private func locked<T>(_ body: (inout State) -> T) -> T {
            state.withLock(body)
        }

        /// False only when the name is certainly not in the folder.
        func mayContain(_ name: String) -> Bool {
            locked { state in
                switch state {
                case .scanning: return true
                case .ready(let names): return names.contains(name)
                }
            }
        }

        var isScanComplete: Bool {
            locked { if case .ready = $0 { return true } else { return false } }
        }

        /// Records that a file with this name now exists.
        func insert(_ name: String) {
            locked { state in
                switch state {
                case .scanning(var journal):
                    state = .scanning(journal: [:])  // drop the old copy so the update is in place
                    journal[CacheKey(name)] = true
                    state = .scanning(journal: journal)
                case .ready(var names):
                    state = .ready(FileNameSet())
                    names.insert(name)
                    state = .ready(names)
                }
            }
        }

        /// Forgets the name if, checked under the lock, `exists()` says the file is gone.
        func eraseIfAbsent(_ name: String, exists: () -> Bool) {
            locked { state in
                guard !exists() else { return }
                switch state {
                case .scanning(var journal):
                    state = .scanning(journal: [:])
                    journal[CacheKey(name)] = false
                    state = .scanning(journal: journal)
                case .ready(var names):
                    state = .ready(FileNameSet())
                    names.remove(name)
                    state = .ready(names)
                }
            }
        }

        /// Ends the scan with the names it listed, replaying what happened meanwhile.
        func finishScan(with listed: [String]) {
            locked { state in
                guard case .scanning(let journal) = state else { return }
                var names = FileNameSet()
                for name in listed { names.insert(name) }
                for (name, present) in journal {
                    if present { names.insert(name.string) } else { names.remove(name.string) }
                }
                state = .ready(names)
            }
            scanDone.leave()
        }

        /// Ends a scan that could not list the folder: the set stays "everything may be
        /// cached" for good, which is slower but never wrong.
        func abandonScan() {
            scanDone.leave()
        }

        /// Blocks until the initial scan has finished (tests, and callers that want a
        /// warm shortcut before serving).
        func waitForScan() { scanDone.wait() }
    }

    /// A set of file names that keeps a SHA-256 hex name (the default naming) as its 32
    /// bytes, inline: a lookup then hashes 8 of them, which are already uniform, and
    /// compares inline words, where a name kept as a string costs a hash of its 64 bytes
    /// and a visit to the string's own storage. Any other name is kept as its bytes.
    ///
    /// Threading: a value, inside `KnownFileNames`' lock.
    struct FileNameSet {
        private var hashed: Set<HashedName> = []
        private var others: Set<CacheKey> = []

        func contains(_ name: String) -> Bool {
            if let digest = HashedName(name) { return hashed.contains(digest) }
            return others.contains(CacheKey(name))
        }

        mutating func insert(_ name: String) {
            if let digest = HashedName(name) { hashed.insert(digest) } else { others.insert(CacheKey(name)) }
        }

        mutating func remove(_ name: String) {
            if let digest = HashedName(name) { hashed.remove(digest) } else { others.remove(CacheKey(name)) }
        }
    }

    /// The 32 bytes a lowercase SHA-256 hex file name spells.
    struct HashedName: Hashable {
        let words: (UInt64, UInt64, UInt64, UInt64)

        /// Nil unless `name` is exactly 64 lowercase hex digits (`sha256Hex`'s form; an
        /// uppercase name is another file, kept as a string).
        init?(_ name: String) {
            var name = name
            let parsed: (UInt64, UInt64, UInt64, UInt64)? = name.withUTF8 { utf8 in
                guard utf8.count == 64 else { return nil }
                var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
                for w in 0..<4 {
                    var word: UInt64 = 0
                    for i in 0..<16 {
                        let c = utf8[w &* 16 &+ i]
                        let digit: UInt8
                        switch c {
                        case 0x30...0x39: digit = c &- 0x30
                        case 0x61...0x66: digit = c &- 0x61 &+ 10
                        default: return nil
                        }
                        word = word << 4 | UInt64(digit)
                    }
                    switch w {
                    case 0: words.0 = word
                    case 1: words.1 = word
                    case 2: words.2 = word
                    default: words.3 = word
                    }
                }
                return words
            }
            guard let parsed else { return nil }
            self.words = parsed
        }

        static func == (a: HashedName, b: HashedName) -> Bool {
            a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
        }

        /// One word of a SHA-256 is as uniform as all four.
        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
        }
    }
}
