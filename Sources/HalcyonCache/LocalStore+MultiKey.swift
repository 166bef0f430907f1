// The multi-key calls: several stores as one ioQueue job (setMany), and several reads
// whose answers come back together in order (getMany).

import Foundation
import HalcyonSupport

extension LocalStore {

    /// Stores every item, in order, as one ioQueue job: no other write runs between them,
    /// and a read of any of the keys queues behind the whole job. `options.toDisk`,
    /// `forcedExtension` and `priority` apply to all. With a journal their records go in
    /// one append, and a failed append fails them all (none is stored); a value written
    /// straight to its file that fails fails alone. The first failure is reported; the
    /// other stores stand.
    ///
    /// - Returns (through `completion`): one `StoreResult` per item, in order.
    @discardableResult
    func storeMany(
        _ items: [StoreItem], options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<[StoreResult], CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return enqueue(write: .keys(items.map(\.key)), callbackQueue, options.priority, completion) { [self] () -> Result<[StoreResult], CacheError> in
            let operations = items.map { item in
                var itemOptions = options
                itemOptions.diskExpiration = item.diskExpiration ?? options.diskExpiration
                itemOptions.memoryExpiration = item.memoryExpiration ?? options.memoryExpiration
                return storeOperation(item.entry, forKey: item.key, options: itemOptions)
            }
            // One journal append for all of them (see `applyInJob`).
            var results: [StoreResult] = []
            results.reserveCapacity(items.count)
            for outcome in applyInJob(operations) {
                switch outcome {
                case .success(let outcome): results.append(LocalStore.storeResult(outcome))
                case .failure(let error): return .failure(error)
                }
            }
            return .success(results)
        }
    }

    /// Removes every key, in order, as one ioQueue job: no other write runs between the
    /// removals, a read of any of the keys queues behind the whole job, and with a
    /// journal their records go in one append. `fromMemory`/`fromDisk` and
    /// `options.forcedExtension` apply to all. The first failure is reported; the
    /// removals before it stand.
    ///
    /// - Returns (through `completion`): per key, in order, whether it held an entry.
    @discardableResult
    func removeMany(
        forKeys keys: [CacheKey], fromMemory: Bool = true, fromDisk: Bool = true, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<[Bool], CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return enqueue(write: .keys(keys), callbackQueue, options.priority, completion) { [self] () -> Result<[Bool], CacheError> in
            let operations = keys.map {
                WriteOperation.remove(key: $0, fromMemory: fromMemory, fromDisk: fromDisk, forcedExtension: options.forcedExtension)
            }
            var removed: [Bool] = []
            removed.reserveCapacity(keys.count)
            for outcome in applyInJob(operations) {
                switch outcome {
                case .success(.removed(let n)): removed.append(n > 0)
                case .success: removed.append(false)
                case .failure(let error): return .failure(error)
                }
            }
            return .success(removed)
        }
    }

    /// Reads every key like `retrieve` (each with its own read-your-writes path) and
    /// delivers all results at once, in the order of `keys`, through `callbackQueue`. The
    /// first failure is delivered instead. Not cancellable once asked (the reads are
    /// short); the returned task only reports.
    func retrieveMany(
        forKeys keys: [CacheKey], options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: @escaping @Sendable (Result<[RetrieveResult], CacheError>) -> Void
    ) {
        // Each key takes the read plan `retrieve` takes: memory hits (and memory-only
        // misses) are answered here; the rest go through `retrieve` one by one, without
        // asking memory again when it already missed.
        var ready = [RetrieveResult?](repeating: nil, count: keys.count)
        var rest: [(index: Int, memoryAsked: Bool)] = []
        for (index, key) in keys.enumerated() {
            switch readPlan(forKey: key, options: options, { memoryRetrieve(forKey: key, options: options) }) {
            case .memoryHit(let found): ready[index] = found
            case .memoryOnlyMiss: ready[index] = RetrieveResult(cacheType: .none, entry: nil, expiresAt: nil)
            case .behindWrite: rest.append((index, false))
            case .diskInline, .diskQueued: rest.append((index, true))
            }
        }
        guard !rest.isEmpty else {
            let results = ready.map { $0! }
            callbackQueue.execute(priority: options.priority) { completion(.success(results)) }
            return
        }
        struct Gather: Sendable {
            var results: [RetrieveResult?]
            var failure: CacheError?
            var left: Int
        }
        let gather = Locked(Gather(results: ready, failure: nil, left: rest.count))
        for (index, memoryAsked) in rest {
            let key = keys[index]
            // Each read answers on `.untouch` (no hop); the gathered reply takes the caller's queue once.
            _ = retrieve(forKey: key, options: options, callbackQueue: .untouch, memoryAsked: memoryAsked) { result in
                let done = gather.withLock { g -> Gather? in
                    switch result {
                    case .success(let r): g.results[index] = r
                    case .failure(let e): if g.failure == nil { g.failure = e }
                    }
                    g.left -= 1
                    return g.left == 0 ? g : nil
                }
                guard let done else { return }
                let outcome: Result<[RetrieveResult], CacheError> = done.failure.map { .failure($0) }
                    ?? .success(done.results.map { $0! })
                callbackQueue.execute(priority: options.priority) { completion(outcome) }
            }
        }
    }
}
