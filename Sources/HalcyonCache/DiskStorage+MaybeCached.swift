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

    /// A set of file names that keeps a name of 64 bytes (a SHA-256 hex name, the default
    /// naming) as eight inline words: a lookup then loads and compares words, where a name
    /// kept as a string costs a hash of its 64 bytes and a visit to the string's own
    /// storage. Any other name is kept as its bytes. Both are exact: a name is in the set
    /// exactly when its bytes were inserted and not removed since.
    ///
    /// Threading: a value, inside `KnownFileNames`' lock.
    struct FileNameSet {
        private var wide: Set<Name64> = []
        private var others: Set<CacheKey> = []

        func contains(_ name: String) -> Bool {
            if let words = Name64(name) { return wide.contains(words) }
            return others.contains(CacheKey(name))
        }

        mutating func insert(_ name: String) {
            if let words = Name64(name) { wide.insert(words) } else { others.insert(CacheKey(name)) }
        }

        mutating func remove(_ name: String) {
            if let words = Name64(name) { wide.remove(words) } else { others.remove(CacheKey(name)) }
        }
    }

    /// The bytes of a 64-byte file name as eight words, as they lie in memory.
    struct Name64: Hashable {
        let words: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)

        /// Nil unless `name` is exactly 64 bytes of UTF-8.
        init?(_ name: String) {
            guard name.utf8.count == 64 else { return nil }
            var name = name
            words = name.withUTF8 { utf8 in
                let raw = UnsafeRawPointer(utf8.baseAddress!)
                func word(_ i: Int) -> UInt64 { raw.loadUnaligned(fromByteOffset: i &* 8, as: UInt64.self) }
                return (word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7))
            }
        }

        static func == (a: Name64, b: Name64) -> Bool {
            a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
                && a.words.4 == b.words.4 && a.words.5 == b.words.5 && a.words.6 == b.words.6 && a.words.7 == b.words.7
        }

        /// The first sixteen bytes: of a SHA-256 hex name, 64 bits of the digest.
        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
        }
    }
}
