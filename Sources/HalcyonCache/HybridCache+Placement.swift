// The operations that span both homes of keys: several keys at once (`storeMany`,
// `removeMany`, `retrieveMany`), prefixes (`removePrefix`), listings (`listKeys`) and the
// whole cache (`clear`). Each splits its keys by `placement` once, hands each home its
// part, and joins the answers in the caller's order. With no upstream every key is local
// and each goes to `LocalStore` whole.

import Foundation
import HalcyonSupport

extension HybridCache {
    // MARK: Several keys

    /// Stores every item, in order. The local items go as one ioQueue job (no other write
    /// runs between them, a read of any of their keys queues behind the whole job, and
    /// with a journal their records go in one append, a failed append failing them all);
    /// the shared items as one upstream batch, each in its key's order. `options.toDisk`,
    /// `forcedExtension` and `priority` apply to all. The first failure is reported; the
    /// other stores stand.
    ///
    /// - Returns (through `completion`): one `StoreResult` per item, in order.
    @discardableResult
    public func storeMany(
        _ items: [StoreItem], options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<[StoreResult], CacheError>) -> Void)? = nil
    ) -> CacheTask {
        let (sharedIndexes, localIndexes) = split(items.indices) { items[$0].key }
        guard let shared, !sharedIndexes.isEmpty else {
            return local.storeMany(items, options: options, callbackQueue: callbackQueue, completion: completion)
        }
        return joined(sharedIndexes, localIndexes, callbackQueue, options.priority, completion, shared: { done in
            shared.storeMany(sharedIndexes.map { items[$0] }, options: options, done)
        }, local: { done in
            self.local.storeMany(localIndexes.map { items[$0] }, options: options, callbackQueue: .untouch, completion: done)
        })
    }

    /// Removes every key, in order, from the chosen tiers: the local keys as one ioQueue
    /// job (with a journal, one append), the shared ones as one upstream batch. Removing
    /// from memory alone (`fromDisk: false`) touches no upstream: each shared key then
    /// drops this host's copy on its own. The first failure is reported; the removals
    /// before it stand.
    ///
    /// - Returns (through `completion`): per key, in order, whether it held an entry.
    @discardableResult
    public func removeMany(
        forKeys keys: [CacheKey], fromMemory: Bool = true, fromDisk: Bool = true, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<[Bool], CacheError>) -> Void)? = nil
    ) -> CacheTask {
        let (sharedIndexes, localIndexes) = split(keys.indices) { keys[$0] }
        guard let shared, !sharedIndexes.isEmpty else {
            return local.removeMany(
                forKeys: keys, fromMemory: fromMemory, fromDisk: fromDisk, options: options, callbackQueue: callbackQueue,
                completion: completion)
        }
        guard fromDisk else {
            return gather(keys.count, callbackQueue, options.priority, completion) { index, done in
                remove(forKey: keys[index], fromMemory: fromMemory, fromDisk: fromDisk, options: options, completion: done)
            }
        }
        return joined(sharedIndexes, localIndexes, callbackQueue, options.priority, completion, shared: { done in
            shared.removeMany(sharedIndexes.map { keys[$0] }, options: options, done)
        }, local: { done in
            self.local.removeMany(forKeys: localIndexes.map { keys[$0] }, fromMemory: fromMemory, fromDisk: fromDisk,
                                  options: options, callbackQueue: .untouch, completion: done)
        })
    }

    /// Reads every key like `retrieve` (each with its own read-your-writes path) and
    /// delivers all results at once, in the order of `keys`, through `callbackQueue`. The
    /// first failure is delivered instead. Not cancellable once asked (the reads are
    /// short).
    public func retrieveMany(
        forKeys keys: [CacheKey], options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<[RetrieveResult], CacheError>) -> Void
    ) {
        guard shared != nil, keys.contains(where: isShared) else {
            return local.retrieveMany(forKeys: keys, options: options, callbackQueue: callbackQueue, completion: completion)
        }
        _ = gather(keys.count, callbackQueue, options.priority, completion) { index, done in
            retrieve(forKey: keys[index], options: options, completion: done)
        }
    }

    // MARK: Prefixes and listings

    /// A page of at most `limit` live keys starting with `prefix`: this host's keys first
    /// (the disk tier's files by file name, then the memory-only entries; see
    /// `LocalStore.listKeys`), then, with an upstream that may share such keys, the shared
    /// keys from the upstream (every host's). Every key whose write was acknowledged
    /// before the listing began and that stays for the whole walk appears exactly once;
    /// keys written meanwhile may or may not. A page never runs on the ioQueue.
    ///
    /// - Parameters:
    ///   - cursor: nil to start; else a previous page's `cursor`. Callers check a cursor
    ///     they did not get from this method with `isValidKeyCursor` first (an unknown
    ///     one starts over).
    ///   - limit: at least 1.
    @discardableResult
    public func listKeys(
        prefix: CacheKey, cursor: String?, limit: Int, callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<KeyPage, CacheError>) -> Void
    ) -> CacheTask {
        guard let shared, shared.mayShare(prefix: prefix) else {
            return local.listKeys(prefix: prefix, cursor: cursor, limit: limit, callbackQueue: callbackQueue, completion: completion)
        }
        if case .upstream(let after)? = LocalStore.KeyCursor(cursor) {
            return shared.keyPage(prefix: prefix, cursor: after, limit: limit, callbackQueue: callbackQueue, completion: completion)
        }
        // The local walk, then on to the upstream's keys ("u": its first page).
        return local.listKeys(prefix: prefix, cursor: cursor, limit: limit, callbackQueue: callbackQueue) { result in
            completion(result.map { page in
                var page = page
                if page.cursor == nil { page.cursor = "u" }
                return page
            })
        }
    }

    /// Removes every key starting with `prefix`. This host's keys go as one whole-cache
    /// write on the ioQueue (reads of any key queue behind it; each key removed through
    /// `perform`, like `remove`). When shared keys may start with `prefix`, they are
    /// removed upstream first (on every primary), this host's copies of them dropped, in
    /// the shared keys' order (`SharedStore.admitPrefix`: after every operation already
    /// admitted on a matching key; operations on matching keys admitted after it wait
    /// for its reply), and then the local keys; the count is both together.
    ///
    /// - Returns (through `completion`): how many keys were removed.
    @discardableResult
    public func removePrefix(
        _ prefix: CacheKey, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<Int, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        guard let shared, shared.mayShare(prefix: prefix) else {
            return local.removePrefix(prefix, callbackQueue: callbackQueue, completion: completion)
        }
        let task = makeTask(callbackQueue, .normal, completion)
        shared.admitPrefix(prefix) { [self] id in
            let reply: @Sendable (Result<Int, CacheError>) -> Void = { result in
                self.deliver(result, task: task, callbackQueue, .normal, completion)
                shared.finishPrefix(id)
            }
            guard task.begin() else { return shared.finishPrefix(id) }
            shared.removePrefixUpstream(prefix) { [self] result in
                switch result {
                case .failure(let error):
                    reply(.failure(error))
                case .success(let upstream):
                    _ = local.removePrefix(prefix, callbackQueue: .untouch) { local in reply(local.map { $0 + upstream }) }
                }
            }
        }
        return task
    }

    // MARK: The whole cache

    /// Removes every entry from the chosen tiers. A whole-cache write on the ioQueue.
    /// With an upstream, clearing memory also drops this host's copies of shared keys,
    /// counted apart (`ClearResult.droppedShared`): the keys stay upstream for every host.
    ///
    /// `shared: true` (with an upstream) also removes every shared key upstream, for every
    /// host: `removePrefix` of each shared prefix (of everything, keeping what is not
    /// shared, when every key is shared or keys carry namespaces), on every primary; lease
    /// keys are left to end on their own. That part keeps the shared keys' order as a
    /// prefix removal of "" does, and the copies kept meanwhile by operations admitted
    /// before it go after it. Both parts start now; the reply waits for both (an upstream
    /// failure fails it, this host cleared all the same), and a cancel only changes the
    /// reply.
    @discardableResult
    public func clear(
        memory: Bool = true, disk: Bool = true, shared clearsShared: Bool = false, callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ClearResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        guard clearsShared, let shared else {
            return local.clear(memory: memory, disk: disk, callbackQueue: callbackQueue, completion: completion)
        }
        let task = makeTask(callbackQueue, .normal, completion)
        _ = task.begin()
        let parts = Locked(ClearParts())
        // The second part to arrive delivers; the prefix hold ends after the reply.
        let finish: @Sendable () -> Void = { [self] in
            guard let (local, upstream, hold) = parts.withLock({ $0.take() }) else { return }
            let result = local.flatMap { local in
                upstream.map { ClearResult(removed: local.removed, droppedShared: local.droppedShared + $0.dropped, removedShared: $0.removed) }
            }
            deliver(result, task: task, callbackQueue, .normal, completion)
            shared.finishPrefix(hold)
        }
        _ = local.clear(memory: memory, disk: disk, callbackQueue: .untouch) { local in
            parts.withLock { $0.local = local }
            finish()
        }
        shared.admitPrefix("") { hold in
            shared.removeSharedKeys { removed in
                let dropped = shared.dropCopies()
                parts.withLock {
                    $0.upstream = removed.map { ($0, dropped) }
                    $0.hold = hold
                }
                finish()
            }
        }
        return task
    }

    // MARK: Splitting and joining

    /// The indexes whose key is shared, and the others, each in order.
    private func split(_ indexes: Range<Int>, key: (Int) -> CacheKey) -> (shared: [Int], local: [Int]) {
        guard shared != nil else { return ([], Array(indexes)) }
        var sharedIndexes: [Int] = [], localIndexes: [Int] = []
        for index in indexes {
            if isShared(key(index)) { sharedIndexes.append(index) } else { localIndexes.append(index) }
        }
        return (sharedIndexes, localIndexes)
    }

    /// Starts `count` calls (`start(index, done)`, in order) and delivers their results
    /// together, in order, or the first failure, once all have answered.
    private func gather<T: Sendable>(
        _ count: Int, _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<[T], CacheError>) -> Void)?,
        _ start: (Int, @escaping @Sendable (Result<T, CacheError>) -> Void) -> CacheTask
    ) -> CacheTask {
        let state = Locked(Gathered<T>(results: Array(repeating: nil, count: count), failure: nil, left: count))
        let finish: @Sendable () -> Void = {
            let done = state.withLock { $0 }
            let outcome: Result<[T], CacheError> = done.failure.map { .failure($0) } ?? .success(done.results.map { $0! })
            callbackQueue.execute(priority: priority) { completion?(outcome) }
        }
        guard count > 0 else {
            finish()
            return CacheTask.finished()
        }
        let tasks = (0..<count).map { index in
            start(index) { result in
                let last = state.withLock { g -> Bool in
                    switch result {
                    case .success(let value): g.results[index] = value
                    case .failure(let error): if g.failure == nil { g.failure = error }
                    }
                    g.left -= 1
                    return g.left == 0
                }
                if last { finish() }
            }
        }
        return CacheTask.cancellable { tasks.forEach { $0.cancel() } }
    }

    /// Runs the shared part (per-item outcomes) and the local part (one outcome for all)
    /// and delivers every item's result in its place, or the first failure.
    private func joined<T: Sendable>(
        _ sharedIndexes: [Int], _ localIndexes: [Int], _ callbackQueue: CallbackQueue, _ priority: Operation.QueuePriority,
        _ completion: (@Sendable (Result<[T], CacheError>) -> Void)?,
        shared: @escaping @Sendable (@escaping @Sendable ([Result<T, CacheError>]) -> Void) -> Void,
        local: (@escaping @Sendable (Result<[T], CacheError>) -> Void) -> CacheTask
    ) -> CacheTask {
        // The work starts now and is not withdrawn: a cancel only changes the reply.
        let task = makeTask(callbackQueue, priority, completion)
        _ = task.begin()
        let parts = Locked((shared: [Result<T, CacheError>]?.none, local: Result<[T], CacheError>?.none, delivered: false))
        let finish: @Sendable () -> Void = { [self] in
            // The second part to arrive delivers.
            let both = parts.withLock { parts -> ([Result<T, CacheError>], Result<[T], CacheError>)? in
                guard let shared = parts.shared, let local = parts.local, !parts.delivered else { return nil }
                parts.delivered = true
                return (shared, local)
            }
            guard let (sharedResults, localResult) = both else { return }
            var results = [T?](repeating: nil, count: sharedIndexes.count + localIndexes.count)
            var failure: CacheError?
            for (index, result) in zip(sharedIndexes, sharedResults) {
                switch result {
                case .success(let value): results[index] = value
                case .failure(let error): failure = failure ?? error
                }
            }
            switch localResult {
            case .success(let values): for (index, value) in zip(localIndexes, values) { results[index] = value }
            case .failure(let error): failure = failure ?? error
            }
            deliver(failure.map { .failure($0) } ?? .success(results.map { $0! }), task: task, callbackQueue, priority, completion)
        }
        shared { results in
            parts.withLock { $0.shared = results }
            finish()
        }
        let record: @Sendable (Result<[T], CacheError>) -> Void = { result in
            parts.withLock { $0.local = result }
            finish()
        }
        if localIndexes.isEmpty { record(.success([])) } else { _ = local(record) }
        return task
    }
}

/// The parts of a `clear(shared: true)` that have arrived.
private struct ClearParts: Sendable {
    var local: Result<HybridCache.ClearResult, CacheError>?
    var upstream: Result<(removed: Int, dropped: Int), CacheError>?
    var hold: UInt64?

    /// Both parts and the prefix hold, once all are here (then emptied, so only one caller gets them).
    mutating func take() -> (Result<HybridCache.ClearResult, CacheError>, Result<(removed: Int, dropped: Int), CacheError>, UInt64)? {
        guard let local, let upstream, let hold else { return nil }
        self = ClearParts()
        return (local, upstream, hold)
    }
}

/// The results of `gather` so far.
private struct Gathered<T: Sendable>: Sendable {
    var results: [T?]
    var failure: CacheError?
    var left: Int
}
