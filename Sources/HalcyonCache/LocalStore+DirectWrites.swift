// The direct commit: writes a caller gathers itself (the transport, the writes of one
// read burst) and commits on the ioQueue while it waits on its own thread, instead of
// queueing a job per write and being called back. A run of sets goes to the journal as
// one group (`commit`); a run of adds, compare-and-sets and increments is decided in
// order by the functions their queued jobs use, each seeing what the writes before it in
// the same commit left, and its stores share one append (`applyInJob`).
//
// When a write is taken directly (`canCommitDirect`): the journal is on, `--fsync` is not
// `always`, the value goes in the journal (under `directValueSize`), no forced extension,
// `toDisk` true, the bounds under 90 %, nothing queued or running (`IOScheduler.isIdle`: a
// sweep, a disk read, `debug.sleep`; the materializer's slices count only while they run,
// about one file operation each), and, for an update, that it can decide without opening a
// file (`decidesWithoutFiles`: memory or the table holds the key, or the disk tier's known
// names say no file can exist), so a cold counter with a file goes the queued way. A queued
// read is counted until it has run, so a later write of its connection cannot be committed
// while it waits; a queued journaled set is not counted, but it runs before any commit
// queued after it. A job queued at the very instant the caller looked can still make it
// wait once; that race is accepted. `commitDirect` asserts it is not on the queue, where it
// would wait for itself. Should a run's append fail, every update of the run fails with it,
// refusals decided after the first store too.
//
// Why a direct path: a write answered from its caller's thread skips the hand-off to the
// ioQueue and back, and a burst's writes share one journal append; an update that had to
// queue is counted only while it runs, so it does not keep later ones off the path. The
// figures are in Benchmarks/RESULTS.md, "The direct commit".

import Foundation

extension LocalStore {

    /// `HybridCache.canCommitDirect` for this host's keys (see there).
    func canCommitDirect(_ write: DirectWrite) -> Bool {
        switch write {
        case .store(let s):
            return admitsDirect(toDisk: s.options.toDisk, forcedExtension: s.options.forcedExtension, valueSize: s.entry.bytes.count)
        case .update(let u):
            return admitsDirect(toDisk: u.options.toDisk, forcedExtension: u.options.forcedExtension, valueSize: u.valueSize)
                && decidesWithoutFiles(u.key, forcedExtension: u.options.forcedExtension)
        }
    }

    /// The checks of `canCommitDirect` that do not depend on the key. Reads the options'
    /// fields in place: the transport's threads call it for every write, and a copy of
    /// the options (or a retain of the store, shared by both threads) costs more than the
    /// checks themselves.
    private func admitsDirect(toDisk: Bool, forcedExtension: String?, valueSize: Int) -> Bool {
        guard let fsync = writeBehind?.fsync, fsync != .always, scheduler.isIdle else { return false }
        return journalsDirectly(toDisk: toDisk, forcedExtension: forcedExtension, valueSize: valueSize)
            && writeBehind?.isNearBounds == false
    }

    /// Whether an update of `key` can decide without opening a file (`liveEntry`): memory
    /// or the unwritten table holds the key, or no file can exist for it. A key memory
    /// evicts between this and the commit still costs its caller one small read: rare, and
    /// no longer than the one file operation a commit may wait behind (a materializer slice).
    func decidesWithoutFiles(_ key: CacheKey, forcedExtension: String?) -> Bool {
        if memoryStorage.isCached(forKey: key) { return true }
        if let wb = writeBehind, wb.holdsUnwritten(key) { return true }
        return !diskStorage.mayHold(key: key, forcedExtension: forcedExtension)
    }

    /// Whether a store with these options goes to the journal, its file written behind
    /// (no file work before the reply).
    func journalsDirectly(_ options: Options, valueSize: Int) -> Bool {
        journalsDirectly(toDisk: options.toDisk, forcedExtension: options.forcedExtension, valueSize: valueSize)
    }

    private func journalsDirectly(toDisk: Bool, forcedExtension: String?, valueSize: Int) -> Bool {
        guard let directValueSize = writeBehind?.directValueSize else { return false }
        return WriteOperation.journalsValue(
            toDisk: toDisk, forcedExtension: forcedExtension, size: valueSize, directValueSize: directValueSize)
    }

    /// `HybridCache.commitDirect` for this host's keys (see there).
    func commitDirect(_ group: [DirectWrite]) -> [DirectOutcome] {
        return scheduler.runDirect { [self] () -> [DirectOutcome] in
            // What was queued first has run (and committed its runs): the group comes after
            // it, and takes nothing queued after it.
            var commit = DirectCommit(cache: self, count: group.count)
            for (index, write) in group.enumerated() {
                switch write {
                case .store(let s): commit.add(s, at: index)
                case .update(let u): commit.add(u, at: index)
                }
            }
            let outcomes = commit.finish()
            writeBehind?.noteWriteActivity()
            return outcomes
        }
    }

    /// The state of one `commitDirect`: the run of sets or of updates not yet applied,
    /// and the outcomes so far. ioQueue only, inside that call.
    private struct DirectCommit {
        let cache: LocalStore
        var outcomes: [DirectOutcome?]
        /// The run of sets not yet applied, and where each stands in the group: two arrays,
        /// so the run goes to `commit` as it is.
        var sets: [PendingWrite] = []
        var setIndexes: [Int] = []
        var updates: [(index: Int, step: UpdateStep)] = []
        /// What the run's updates decided to store on disk, as the key's live entry will
        /// then be (nil: the key will hold nothing).
        var decided: [CacheKey: LiveEntry?] = [:]

        init(cache: LocalStore, count: Int) {
            self.cache = cache
            outcomes = Array(repeating: nil, count: count)
        }

        mutating func add(_ s: DirectStore, at index: Int) {
            applyUpdates()
            let operation = cache.storeOperation(s.entry, forKey: s.key, options: s.options)
            sets.append(PendingWrite(operation, scope: .direct, task: nil, finish: nil))
            setIndexes.append(index)
        }

        mutating func add(_ u: DirectUpdate, at index: Int) {
            // It decides on what the sets before it stored: they go first.
            applySets()
            let live: LiveEntry?
            if let known = decided[u.key] {
                live = known
            } else {
                do throws(CacheError) {
                    live = try cache.liveEntry(forKey: u.key, forcedExtension: u.options.forcedExtension)
                } catch {
                    updates.append((index, .answered(DirectOutcome.failure(of: u.change, error))))
                    return
                }
            }
            let step = cache.step(u, live: live)
            guard case .store(let operation, let read) = step else {
                updates.append((index, step))
                return
            }
            guard case .store(let s) = operation, s.toDisk else {
                // What memory makes of a memory-only entry is memory's to say: applied
                // before anything after it decides.
                updates.append((index, step))
                applyUpdates()
                return
            }
            // Stamped now, in order, so the next update of the key sees its version.
            let now = cache.config.disk.clock.now()
            let stamped = operation.stamped(now, versions: cache.versions)
            decided[u.key] = LocalStore.liveEntry(after: stamped, now: now)
            updates.append((index, .store(stamped, read)))
        }

        mutating func finish() -> [DirectOutcome] {
            applySets()
            applyUpdates()
            return outcomes.map { $0! }
        }

        private mutating func applySets() {
            guard !sets.isEmpty else { return }
            cache.scheduler.beginDirect(count: sets.count)
            for (index, outcome) in zip(setIndexes, cache.commit(sets)) {
                let result = outcome ?? .failure(CacheError.cancelled(started: false))
                outcomes[index] = .stored(result.map(LocalStore.storeResult))
            }
            sets.removeAll(keepingCapacity: true)
            setIndexes.removeAll(keepingCapacity: true)
        }

        /// Appends the stores the run's updates decided on with one write and applies
        /// them (`applyInJob`). A failed append fails them all, and the answers decided
        /// after the first of them too: those were decided on stores that never happened.
        private mutating func applyUpdates() {
            guard !updates.isEmpty else { return }
            cache.scheduler.beginDirect(count: 1)
            let stores = updates.compactMap { u -> WriteOperation? in
                if case .store(let operation, _) = u.step { operation } else { nil }
            }
            var results = (stores.isEmpty ? [] : cache.applyInJob(stores)).makeIterator()
            cache.scheduler.finish(.direct)
            var failure: CacheError?
            for u in updates {
                switch u.step {
                case .answered(let outcome):
                    outcomes[u.index] = failure.map { outcome.failed($0) } ?? outcome
                case .store(_, let read):
                    let result = results.next()!.map(LocalStore.storeResult)
                    if case .failure(let error) = result, failure == nil { failure = error }
                    outcomes[u.index] = read(result)
                }
            }
            updates.removeAll(keepingCapacity: true)
            decided.removeAll(keepingCapacity: true)
        }
    }

    /// An update of a direct commit, decided: its outcome, or the store to apply and how
    /// the store's result reads.
    private enum UpdateStep {
        case answered(DirectOutcome)
        case store(WriteOperation, (Result<StoreResult, CacheError>) -> DirectOutcome)

        init<T>(_ decision: UpdateDecision<T>, _ wrap: @escaping (Result<T, CacheError>) -> DirectOutcome) {
            switch decision {
            case .answer(let answer): self = .answered(wrap(.success(answer)))
            case .store(let operation, let read): self = .store(operation) { wrap($0.map(read)) }
            }
        }
    }

    /// The decision of `u` on `live`, the key's live entry.
    private func step(_ u: DirectUpdate, live: LiveEntry?) -> UpdateStep {
        switch u.change {
        case .add(let entry):
            return UpdateStep(
                decideConditionalStore(entry, forKey: u.key, options: u.options, live: live, when: LocalStore.isAbsent),
                DirectOutcome.conditional)
        case .compareAndStore(let entry, let version):
            return UpdateStep(
                decideConditionalStore(
                    entry, forKey: u.key, options: u.options, live: live, when: LocalStore.hasVersion(version)),
                DirectOutcome.conditional)
        case .increment(let delta, let initial, let flags):
            return UpdateStep(
                decideIncrement(forKey: u.key, by: delta, initial: initial, flags: flags, options: u.options, live: live),
                DirectOutcome.incremented)
        }
    }

    /// The live entry a stamped disk store leaves under its key, as `liveEntry` will then
    /// read it (nil: the store leaves the key empty, its lifetime being over already; see
    /// `storeUnwritten`).
    static func liveEntry(after operation: WriteOperation, now: Date) -> LiveEntry? {
        guard case .store(let s) = operation, let expiresAt = s.expiresAt,
              !s.expiration.isExpired, expiresAt > now
        else { return nil }
        return LiveEntry(entry: s.entry, expiresAt: expiresAt, slides: !s.isAbsolute)
    }
}

extension LocalStore.DirectOutcome {
    /// A failure of the kind `change` answers with.
    static func failure(of change: LocalStore.DirectUpdate.Change, _ error: CacheError) -> Self {
        switch change {
        case .add, .compareAndStore: .conditional(.failure(error))
        case .increment: .incremented(.failure(error))
        }
    }

    /// The same kind of outcome, failed with `error`.
    func failed(_ error: CacheError) -> Self {
        switch self {
        case .stored: .stored(.failure(error))
        case .conditional: .conditional(.failure(error))
        case .incremented: .incremented(.failure(error))
        }
    }
}
