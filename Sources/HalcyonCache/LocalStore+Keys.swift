// Listing and removing keys by prefix: `cache.keys` pages through the disk tier's files
// (headers only, so it works from the files alone after a restart) and then through the
// memory-only entries; `cache.removePrefix` removes every match as one write.

import Foundation

extension LocalStore {

    /// Where a listing stands. The walk goes through the disk tier's files in file-name
    /// order (an entry with a disk copy is listed from its file, never from memory, so it
    /// appears once), then through the entries held in memory only, in key byte order.
    /// A cursor is `"d"` + the last file name examined, or `"m"` + the last key listed,
    /// or `"u"` + the upstream's own cursor (shared keys, listed last, from the upstream:
    /// `SharedStore+Keys.swift`, by way of `HybridCache.listKeys`).
    enum KeyCursor: Equatable {
        case disk(after: String?)
        case memory(after: String?)
        case upstream(after: String?)

        init?(_ text: String?) {
            guard let text else { self = .disk(after: nil); return }
            switch text.first {
            case "d": self = .disk(after: String(text.dropFirst()))
            case "m": self = .memory(after: String(text.dropFirst()))
            case "u": self = .upstream(after: text.count > 1 ? String(text.dropFirst()) : nil)
            default: return nil
            }
        }
    }

    /// A page of at most `limit` live keys starting with `prefix`, from both tiers, each
    /// once. A page reads at most `limit` files' headers (values are never loaded) and
    /// runs on a utility queue, never on the ioQueue: the tiers are thread-safe, and a
    /// listing must not hold up writes. Every key whose write was acknowledged before
    /// the listing began and that stays for the whole walk appears exactly once; keys
    /// written meanwhile may or may not.
    ///
    /// - Parameters:
    ///   - cursor: nil to start; else a previous page's `cursor`. Callers check a cursor
    ///     they did not get from this method with `isValidKeyCursor` first (an unknown
    ///     one starts over).
    ///   - limit: at least 1.
    @discardableResult
    func listKeys(
        prefix: CacheKey, cursor: String?, limit: Int, callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<KeyPage, CacheError>) -> Void
    ) -> CacheTask {
        let task = makeTask(callbackQueue, .normal, completion)
        DispatchQueue.global(qos: .utility).async { [self] in
            guard task.begin() else { return }
            let result = keyPage(prefix: prefix, cursor: cursor, limit: limit)
            deliver(result, task: task, callbackQueue, .normal, completion)
        }
        return task
    }

    private func keyPage(prefix: CacheKey, cursor: String?, limit: Int) -> Result<KeyPage, CacheError> {
        let limit = max(1, limit)
        var page = KeyPage(keys: [], cursor: nil)
        var position = KeyCursor(cursor) ?? .disk(after: nil)
        if case .disk(let after) = position {
            if diskStorage.isReady {
                do throws(CacheError) {
                    // Journaled writes not yet in their files are listed by file name with the
                    // files. The table is read before the folder: the write-behind writes a file
                    // before it drops the entry, so a key moving from one to the other during
                    // this page is seen in at least one, and counted once. The files the table
                    // names are not opened (the table answers for them), and the page counts
                    // as an off-queue reader: the materializer may be rewriting one of those
                    // files in place right now, and will start no rewrite until the page ends
                    // (see `materializeSlice`).
                    let (unwritten, listed) = try readingFiles {
                        () throws(CacheError) -> ([CacheKey: String], DiskStorage.KeyPage) in
                        let (unwritten, tableNames) = unwrittenKeysAndNames(prefix: prefix)
                        // Every file, expired or not: a resident copy may vouch for a file whose
                        // own times lag behind the lifetime memory extended.
                        let listed = try diskStorage.listKeys(
                            prefix: prefix, after: after, limit: limit, referenceDate: Date(timeIntervalSince1970: 0),
                            skipping: tableNames)
                        return (unwritten, listed)
                    }
                    let now = config.disk.clock.now()
                    var seen = Set<CacheKey>()
                    for found in listed.keys where found.expiration > now || memoryStorage.meta(forKey: found.key) != nil
                        || unwritten[found.key] != nil {
                        guard !seen.contains(found.key) else { continue }
                        page.keys.append(found.key)
                        seen.insert(found.key)
                    }
                    for (key, name) in unwritten where !seen.contains(key) {
                        let afterCursor = after.map { $0.utf8.lexicographicallyPrecedes(name.utf8) } ?? true
                        let beforeEnd = listed.nextCursor.map { !$0.utf8.lexicographicallyPrecedes(name.utf8) } ?? true
                        if afterCursor && beforeEnd { page.keys.append(key) }
                    }
                    if let next = listed.nextCursor {
                        page.cursor = "d" + next
                        return .success(page)
                    }
                } catch {
                    return .failure(error)
                }
            }
            position = .memory(after: nil)
        }
        guard case .memory(let after) = position else { return .success(page) }
        var memoryOnly = memoryStorage.keys(prefix: prefix, memoryOnly: true)
        // Memory entries that are not this store's (copies of shared keys) are listed by their own home.
        if let neighbour { memoryOnly.removeAll(where: neighbour.isCopy) }
        if let after { memoryOnly.removeAll { !after.utf8.lexicographicallyPrecedes($0.utf8) } }
        memoryOnly.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let room = max(1, limit - page.keys.count)
        page.keys.append(contentsOf: memoryOnly.prefix(room))
        if memoryOnly.count > room, let last = memoryOnly.prefix(room).last { page.cursor = "m" + last.string }
        return .success(page)
    }

    /// The live journaled entries not yet in their files whose keys start with `prefix`.
    /// Empty without a journal.
    private func unwrittenKeys(prefix: CacheKey) -> [CacheKey] {
        guard let writeBehind else { return [] }
        let now = config.disk.clock.now()
        return writeBehind.unwrittenKeys(prefix: prefix, at: now, allKeys: false).live
    }

    /// `unwrittenKeys` (key → file name), and the file names of every entry in the table
    /// (live or not), read under one lock and hashed to names after it. Only inside
    /// `readingFiles`: an entry that joins the table after the lock was let go is not
    /// among the names, but its file is then replaced by rename, never rewritten in place.
    private func unwrittenKeysAndNames(prefix: CacheKey) -> (keys: [CacheKey: String], names: Set<CacheKey>) {
        guard let writeBehind else { return ([:], []) }
        let now = config.disk.clock.now()
        let (live, all) = writeBehind.unwrittenKeys(prefix: prefix, at: now, allKeys: true)
        let liveKeys = Set(live)
        var keys: [CacheKey: String] = [:]
        var names = Set<CacheKey>(minimumCapacity: all.count)
        for key in all {
            let name = diskStorage.fileName(forKey: key, forcedExtension: nil)
            names.insert(CacheKey(name))
            if liveKeys.contains(key) { keys[key] = name }
        }
        return (keys, names)
    }

    /// Whether `cursor` could have come from `listKeys` (nil starts a listing).
    static func isValidKeyCursor(_ cursor: String?) -> Bool {
        KeyCursor(cursor) != nil
    }

    /// Removes every key starting with `prefix` from both tiers, as one whole-cache write
    /// on the ioQueue: reads of any key queue behind it. Each key is removed through
    /// `perform`, like `remove`.
    ///
    /// - Returns (through `completion`): how many keys were removed.
    @discardableResult
    func removePrefix(
        _ prefix: CacheKey, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        enqueue(write: .wholeCache, callbackQueue, .normal, completion) { [self] () -> Result<Int, CacheError> in
            var keys = Set(memoryStorage.keys(prefix: prefix, memoryOnly: false))
            keys.formUnion(unwrittenKeys(prefix: prefix))
            // Files stored with a forced extension: only that extension names them.
            var forced: [(key: CacheKey, forcedExtension: String)] = []
            if diskStorage.isReady {
                var cursor: String?
                repeat {
                    do throws(CacheError) {
                        // Expired files too: a resident copy may vouch for one, and a file
                        // nobody can read is no loss.
                        let listed = try diskStorage.listKeys(
                            prefix: prefix, after: cursor, limit: 4096, referenceDate: Date(timeIntervalSince1970: 0),
                            everyFile: true)
                        for found in listed.keys {
                            keys.insert(found.key)
                            if let ext = found.forcedExtension { forced.append((found.key, ext)) }
                        }
                        cursor = listed.nextCursor
                    } catch {
                        return .failure(error)
                    }
                } while cursor != nil
            }
            var removed = Set<CacheKey>()
            let targets = keys.map { ($0, String?.none) } + forced.map { ($0.key, Optional($0.forcedExtension)) }
            for (key, forcedExtension) in targets {
                let live = (try? liveEntry(forKey: key, forcedExtension: forcedExtension)) != nil
                let operation = WriteOperation.remove(
                    key: key, fromMemory: true, fromDisk: true, forcedExtension: forcedExtension)
                switch perform(operation) {
                case .success(.removed(let n)) where n > 0 && live: removed.insert(key)
                case .success: break
                case .failure(let error): return .failure(error)
                }
            }
            return .success(removed.count)
        }
    }
}
