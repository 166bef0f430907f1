// The order of the local store's work: the one serial queue that runs every write, every
// queued disk read and every piece of maintenance, and the book that tells a read whether
// a write it must see is still waiting there. No other file touches the queue or the book.
//
// The write book's rules (read-your-writes). 1. A write is counted and queued inside the
// same hold of the book's lock, so queue order is counting order, and a reader that saw the
// count queues after the write. 2. A write is uncounted only after its effects are in both
// tiers (or it was skipped, cancelled); until then every read of its key (of any key, for a
// whole-cache write) queues behind it: memory is not consulted on the caller's thread and
// `loadDiskFileSynchronously` is ignored. 3. A disk hit is put back into memory only if no
// write could have changed the key while the disk was read: a read on the caller's thread
// compares the epoch every write bumps at enqueue; a queued read compares the epoch only
// inline writes bump (queued writes cannot overlap it). The comparison and the memory store
// happen under the book's lock, and inline writes store into memory under the same lock, so
// an older disk value never overwrites a newer memory value; a skipped put-back costs one
// later disk read. 4. A `store(toDisk: false)` puts the value in memory only and removes
// the key's disk copy, so a later eviction makes the key a miss, never a return to an older
// value; with nothing queued for the key and no live disk copy (checked under the lock) it
// runs inline, otherwise it is an ordinary queued write. 5. The writes of a direct commit
// are not counted per key (`WriteScope.direct`): the commit is one step inside the queue,
// none of its writes is acknowledged before it ends, a read racing an unacknowledged write
// may see either value, and the connection's own later reads wait for its writes through
// its own list of keys; so reads on other loops never take the book's lock because of them.
// They still bump the epoch (rule 3), and while `directCommits` counts them no store runs
// inline (it could look at the unwritten table before a commit's put and store into memory
// after the commit's insert).
//
// The locks of the storage engine and the one order they nest in. Each is a `Locked`
// (HalcyonSupport); a body holding one takes at most the locks listed after it, and
// never one before it:
//
//   1. `LeaseAttempt.step`              a lease call's progress (LeaseAttempt.swift)
//   2. `SharedStore.state`              shared keys' order, copies' rules, lease watches
//   3. `IOScheduler.book`               the write book (this file)
//   4. `MemoryStorage.Backend.namespaces` the namespace accounts, held while each memory
//      shard installs its copy (MemoryStorage+Namespaces.swift); taken only from quota
//      changes and namespace registration, which hold no other lock
//   5. leaves, each taken alone:        a memory shard; the memory tier's write-back set
//      and handler slot; `IOScheduler.order`; the unwritten table; the lease table
//      (`Leases.state`); the counters; the journal writer's state
//
// What runs under the book: the put-back of a disk hit and an inline memory-only store
// (memory shard, write-back set, counters), a write's journal-free effects when it runs
// inline (`LocalStore.written`: the lease table, whose wake-ups run on its own queue),
// the checkpoint's look at the unwritten table, and counted enqueues (`order`). A body
// never calls out while holding a lock, with one exception: the memory tier's
// write-back handler, which a store under the book may call when the first write-back
// becomes pending. It is safe because all it does is enqueue a background job, which
// takes only `order`, a leaf, and never waits for the queue. `SharedStore.state` is
// held across the memory tier's store and removal of a copy (a shard, a leaf); no
// lock is ever held while a completion, a wake-up or an upstream call runs.
//
// Tested with 8 threads storing and at once reading their keys (a 200-byte memory tier, so
// most reads miss and go through put-back), with and without synchronous disk reads, and
// with 8 threads writing increasing numbers to 3 shared keys: no read ever returned a value
// older than the reader's own last write.

import CHalcyonSystem
import Dispatch
import HalcyonSupport
import Synchronization

extension LocalStore {
    /// The one owner of the order in which the local store's work takes effect.
    ///
    /// The rule it keeps: work takes effect in the order it was enqueued. A job runs on the
    /// serial ioQueue after every job enqueued before it. A read that must see a queued
    /// write (`mustQueue`) is enqueued behind it. A direct group (`runDirect`) runs on the
    /// queue after everything enqueued before it, on its caller's thread when the queue
    /// is idle; so does a disk read that finds the queue idle (`runReadDirectIfIdle`).
    /// Group commit (`takeRun`) may apply, together with a journaled write, only
    /// the journaled writes enqueued right after it with no other job between them: the
    /// run at the head of the order. (Taking writes that sit behind a read would let the
    /// read see writes that arrived after it.)
    ///
    /// Every enqueue takes a ticket and queues its job in one hold of the `order` lock, so
    /// ticket order is queue order; a run is a stretch of consecutive tickets. A write is
    /// counted in the book in the same hold of the book's lock as it is queued (book, then
    /// order: the only nesting of the two), so a reader that saw it counted queues after
    /// it. Work that counts nothing (a read, background work) takes only the order lock, so
    /// it may be enqueued with the book held (the memory tier asks for a write-back drain
    /// from inside stores that run under it).
    /// Timers never put work on the queue themselves: they fire on `timerQueue` and
    /// enqueue a ticketed job, so nothing reaches the queue without a ticket.
    ///
    /// Counting, for `isIdle` (whether a direct group would wait behind a long job):
    /// - `.read`, `.write`, `.background`: from enqueue until the job has run;
    /// - `.shortWrite`, `.slice`: only while the job runs (each touches at most one small
    ///   file; counted from enqueue, one of them would keep the next direct groups off the
    ///   direct path for as long as such work keeps coming);
    /// - journaled writes (`enqueueJournaled`): not at all when `countedWhileQueued` is
    ///   false (a journaled set touches no file; its job commits a run, which a direct
    ///   group behind it only waits for).
    ///
    /// Rounds: the jobs the queue runs back to back form a round, which ends when no job
    /// is queued behind the one that just ran, after `roundJobLimit` jobs, after the job
    /// during which its first wake-up has waited `roundTimeLimit` (slow reads), or before
    /// a job that is not a read (it may hold the queue for long). A completion that hands a
    /// reply to another thread defers that thread's wake-up to the end of the round
    /// (`DeliveryRound.whenRoundEnds`): one wake-up per round and thread instead of one
    /// per reply. Only the wake-up waits; what the completion hands over is handed over
    /// at once. (A queue thread does not spin for new work when a round ends with nothing
    /// queued: with one request in flight the next one comes a client's round trip later,
    /// longer than a spin pays for; Benchmarks/RESULTS.md, "Disk hits against the file
    /// floor".)
    ///
    /// Threading: every method may be called from any thread, except where it says
    /// "on the queue" (checked with `assertOnQueue`). `Sendable`: the queue is a
    /// libdispatch object, the book is `Locked`, the counts are atomics, the round is
    /// touched only on the queue.
    final class IOScheduler: Sendable {
        /// What a job is, which decides how it is counted and what it holds in the book.
        enum JobKind {
            /// Reads keys (a disk read, a read behind a write).
            case read
            /// A write counted in the book under its scope until `finish(_:)`.
            case write(WriteScope)
            /// A write whose store goes to the journal (an update that decides on memory):
            /// as `write`, counted in `isIdle` only while it runs.
            case shortWrite(WriteScope)
            /// Work that writes no key (a write-back drain, a flush, a recount, a sweep
            /// asked for), counted from enqueue.
            case background
            /// A slice of background work (the materializer, the timed sweep), counted
            /// only while it runs.
            case slice
        }

        /// The serial queue; private: work reaches it only through this type.
        private let queue: DispatchQueue
        /// Where timers fire; they only enqueue.
        let timerQueue: DispatchQueue
        /// Jobs counted for `isIdle` (see the type's comment).
        private let jobs = Atomic<Int>(0)
        /// The write book; held only to count, to compare epochs, to enqueue a write and
        /// around a memory store that must not race a write.
        private let book = Locked(WriteBook())
        /// The ticket of the next job; held only to take a ticket and queue its job, so
        /// ticket order is queue order. Never held while taking the book's lock.
        private let order = Locked<UInt64>(0)
        /// All writes queued or running: the book's total, kept outside its lock (changed
        /// only under it). A memory read that sees 0 knows no write concerns its key
        /// without taking the lock every reader of every key would otherwise share: a
        /// write's reply follows its decrement, and a client's own write is counted on its
        /// thread before its next read looks.
        private let counted = Atomic<Int>(0)

        /// Jobs handed to the queue and not finished (direct groups included): whether
        /// anything waits behind the running job.
        private let submitted = Atomic<Int>(0)
        /// The wake-ups deferred to the end of the current round; only on the queue.
        private let round = Round()

        /// The most jobs in one round while work keeps coming: the pipelined bursts of
        /// reads of a few connections. Each round's end wakes every loop it holds replies
        /// for (an `eventfd` write here, a switch there), so a round of one connection's
        /// burst paid that per burst; far longer rounds hold replies back until the loops
        /// run dry and the clients stop sending, and `roundTimeLimit` ends them first
        /// anyway (Benchmarks/RESULTS.md, "Disk hits: longer ioQueue rounds, a three-chain
        /// CRC32C").
        static let roundJobLimit = 64

        /// How long, in ns, a round keeps its first wake-up once it has one while work
        /// keeps coming: with slow reads, the first reply of a round waits at most this
        /// plus one job.
        static let roundTimeLimit: UInt64 = 500_000

        init(label: String) {
            queue = DispatchQueue(label: label)
            timerQueue = DispatchQueue(label: label + ".timers")
            queue.setSpecific(key: Round.key, value: round)
        }

        // MARK: Enqueueing

        /// Queues `job` as a job of `kind`, after everything enqueued before. A write is
        /// counted in the book from here until the job calls `finish(_:)`, which is what
        /// makes later reads of its keys queue behind it.
        func enqueue(_ kind: JobKind, _ job: @escaping @Sendable () -> Void) {
            switch kind {
            case .write(let scope), .shortWrite(let scope):
                book.withLock { book in
                    register(scope, in: &book)
                    queueTicketed(kind, job)
                }
            case .read, .background, .slice:
                queueTicketed(kind, job)
            }
        }

        /// Queues a journaled write: `pending` joins the journal queue with its ticket, and
        /// its job runs `commit` with that ticket unless a run already took it.
        func enqueueJournaled(
            _ pending: PendingWrite, countedWhileQueued: Bool, commit: @escaping @Sendable (UInt64) -> Void
        ) {
            book.withLock { book in
                register(pending.scope, in: &book)
                order.withLock { next in
                    let ticket = next
                    next &+= 1
                    pending.ticket = ticket
                    let job: @Sendable () -> Void = { if !pending.taken { commit(ticket) } }
                    if countedWhileQueued { queueCounted(job, isRead: false) } else { submit(isRead: false, job) }
                }
                // In ticket order: every journaled write is queued with the book held.
                book.journalQueue.append(pending)
            }
        }

        /// Queues `job` on the queue after `delay`: the delay passes on `timerQueue`, then
        /// the job is enqueued as `kind` (so it takes its place, and its ticket, then).
        func enqueue(after delay: DispatchTimeInterval, _ kind: JobKind, _ job: @escaping @Sendable () -> Void) {
            timerQueue.asyncAfter(deadline: .now() + delay) { [self] in enqueue(kind, job) }
        }

        /// Takes the run of journaled writes that begins with the job of `ticket`, now
        /// running: the writes of the consecutive tickets from it on, up to the first job
        /// that is not one of them. On the queue, from that job.
        func takeRun(startingAt ticket: UInt64) -> [PendingWrite] {
            assertOnQueue()
            return book.withLock { book in
                // Every earlier job has run and taken its own run: the head is this one.
                assert(book.journalQueue.first?.ticket == ticket, "a run begins at the head of the journal queue")
                var next = ticket
                var count = 0
                for pending in book.journalQueue {
                    guard pending.ticket == next else { break }
                    pending.taken = true
                    next &+= 1
                    count += 1
                }
                let run = Array(book.journalQueue.prefix(count))
                book.journalQueue.removeFirst(count)
                return run
            }
        }

        /// Runs `body` on the queue after everything enqueued before, waiting on the
        /// caller's thread (`DispatchQueue.sync`; when the queue is idle `body` runs on
        /// this thread): a direct group. It takes a ticket first, so no run enqueued
        /// before it reaches past it. While another thread's group runs, it spins first
        /// (`awaitOtherDirect`).
        ///
        /// - Important: never on the queue, nor from work the queue waits for.
        func runDirect<T>(isRead: Bool = false, _ body: () -> T) -> T {
            dispatchPrecondition(condition: .notOnQueue(queue))
            awaitOtherDirect()
            order.withLock { $0 &+= 1 }
            submitted.add(1, ordering: .sequentiallyConsistent)
            return queue.sync {
                directRunning.store(true, ordering: .relaxed)
                defer { directRunning.store(false, ordering: .releasing) }
                return runInRound(isRead: isRead, body)
            }
        }

        /// Runs a read on the queue from the caller's thread, as `runDirect` does, when the
        /// queue is idle and the caller is not on it; nil (nothing run) otherwise, and the
        /// caller queues the read.
        ///
        /// Why: a queued read with nothing else to do costs a context switch on each side of
        /// each hand-off (the queue's thread woken for it, the caller's loop woken for its
        /// reply). On an idle queue `sync` runs the block on the calling thread at once, and
        /// the read still takes effect in the queue's order.
        func runReadDirectIfIdle<T>(_ body: () -> T) -> T? {
            guard isIdle, !directRunning.load(ordering: .relaxed), !isCurrent else { return nil }
            return runDirect(isRead: true, body)
        }

        /// Whether the caller runs on the queue (a job, or a direct group inside `sync`).
        var isCurrent: Bool { DispatchQueue.getSpecific(key: Round.key) === round }

        /// Whether a direct group runs on the queue now: a hint for `awaitOtherDirect`
        /// only; the queue alone orders the groups.
        private let directRunning = Atomic<Bool>(false)

        /// The longest a caller spins for another thread's direct group before it blocks
        /// in `DispatchQueue.sync`: a wait longer than a halted vCPU's wake-up costs more
        /// to spin through than sleeping does (Benchmarks/RESULTS.md, "The direct commit").
        static let directSpinLimit: UInt64 = 40_000

        /// Whether some caller spins in `awaitOtherDirect` now: at most one does.
        private let directSpinning = Atomic<Bool>(false)

        /// Spins while another thread's direct group runs, up to `directSpinLimit` ns; a
        /// caller that finds another one spinning already blocks in `sync` at once, so that
        /// with more event loops than two at most one core spins.
        ///
        /// Why spin: two event loops commit their groups in turn, and a loop whose group
        /// finds the other's running would otherwise sleep on a futex in `sync` until it
        /// ends; every connection of both loops is then waiting for its replies, the
        /// waiter's vCPU halts, and waking it again costs more than the wait. Each turn of
        /// the loop is a CPU spin-wait hint (`hc_cpu_relax`), which leaves the core to the
        /// thread being waited for. (`sched_yield` instead costs more CPU for the same
        /// rate; the runs that chose all this are in Benchmarks/RESULTS.md, "The direct
        /// commit".)
        private func awaitOtherDirect() {
            guard directRunning.load(ordering: .relaxed),
                  directSpinning.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
            else { return }
            defer { directSpinning.store(false, ordering: .relaxed) }
            let deadline = MonotonicClock.nanoseconds() &+ Self.directSpinLimit
            var spins = 0
            while directRunning.load(ordering: .relaxed) {
                hc_cpu_relax()
                spins &+= 1
                if spins & 63 == 0, MonotonicClock.nanoseconds() > deadline { return }
            }
        }

        /// Test hook: runs `body` on the queue after everything enqueued before it, and
        /// waits for it.
        func runNowForTesting<T>(_ body: () -> T) -> T { runDirect(body) }

        /// Test hook: holds the queue until `gate` returns (enqueued as background work).
        func holdForTesting(_ gate: @escaping @Sendable () -> Void) { enqueue(.background, gate) }

        /// Test hook: marks the queue so a test can tell that code runs on it.
        func setSpecificForTesting<T>(key: DispatchSpecificKey<T>, value: T) { queue.setSpecific(key: key, value: value) }

        // MARK: Questions

        /// No counted job is queued or running: a direct group that starts now waits for no
        /// one but other direct groups, slices and runs of journaled writes.
        var isIdle: Bool { jobs.load(ordering: .sequentiallyConsistent) == 0 }

        /// Writes queued or running (for stats).
        var writesQueued: Int { counted.load(ordering: .sequentiallyConsistent) }

        /// Whether a read of `key` must queue behind a write (read-your-writes): the book's
        /// lock only when some write is queued at all.
        func mustQueue(_ key: CacheKey) -> Bool {
            guard counted.load(ordering: .sequentiallyConsistent) > 0 else { return false }
            return book.withLock { $0.mustQueue(key) }
        }

        /// `mustQueue` of each key, under one hold of the lock.
        func mustQueue(_ keys: [CacheKey]) -> [Bool] {
            guard counted.load(ordering: .sequentiallyConsistent) > 0 else {
                return [Bool](repeating: false, count: keys.count)
            }
            return book.withLock { book in keys.map { book.mustQueue($0) } }
        }

        /// Whether `key` must queue, and the epochs a read that does not queue compares
        /// later (its put-back into memory must not overwrite a write made meanwhile),
        /// under one hold of the lock.
        func readStamp(forKey key: CacheKey) -> (mustQueue: Bool, epochs: Epochs) {
            book.withLock { ($0.mustQueue(key), Epochs(all: $0.epoch, inline: $0.inlineEpoch)) }
        }

        /// The epochs now.
        var epochs: Epochs { book.withLock { Epochs(all: $0.epoch, inline: $0.inlineEpoch) } }

        /// Runs `body` (a memory store of what a disk read found) with the book held, when
        /// `unchanged` says no write made since the read began concerns it; else nothing.
        func ifUnchanged(_ unchanged: (Epochs) -> Bool, _ body: () -> Void) {
            book.withLock { book in
                if unchanged(Epochs(all: book.epoch, inline: book.inlineEpoch)) { body() }
            }
        }

        /// Runs `body` (a write applied on the caller's thread) with the book held, when no
        /// write to `key` nor a direct group is queued or running and `mayRunInline`
        /// agrees; returns nil (nothing ran) otherwise: then enqueue the write.
        func runInlineWrite<T>(forKey key: CacheKey, _ mayRunInline: () -> Bool, _ body: () -> T) -> T? {
            book.withLock { book -> T? in
                guard !book.mustQueue(key), book.directCommits == 0, mayRunInline() else { return nil }
                book.epoch &+= 1
                book.inlineEpoch &+= 1
                return body()
            }
        }

        /// Runs `body` with the book held and nothing else: for reading two things (the
        /// journal's end and the unwritten table) that an inline write changes together
        /// under it.
        func withBookHeld<T>(_ body: () -> T) -> T { book.withLock { _ in body() } }

        // MARK: Counting writes

        /// Counts `count` writes of a direct group (see `WriteScope.direct`); on the queue.
        func beginDirect(count: Int) {
            book.withLock { book in for _ in 0..<count { register(.direct, in: &book) } }
        }

        /// Uncounts a write once its effects are in place (or it was skipped).
        func finish(_ scope: WriteScope) { finish([scope]) }

        /// Uncounts several writes under one hold of the lock.
        func finish(_ scopes: [WriteScope]) {
            book.withLock { book in
                var uncounted = 0
                for scope in scopes {
                    book.unregister(scope)
                    if scope.isCounted { uncounted += 1 }
                }
                counted.subtract(uncounted, ordering: .sequentiallyConsistent)
            }
        }

        // MARK: The queue itself

        /// Checks that the caller runs on the queue.
        func assertOnQueue() { dispatchPrecondition(condition: .onQueue(queue)) }

        /// Checks that the caller does not run on the queue.
        func assertNotOnQueue() { dispatchPrecondition(condition: .notOnQueue(queue)) }

        private func register(_ scope: WriteScope, in book: inout WriteBook) {
            book.register(scope)
            if scope.isCounted { counted.add(1, ordering: .sequentiallyConsistent) }
        }

        /// Takes a ticket and queues `job` as `kind` says it is counted, in one hold of
        /// the order lock.
        private func queueTicketed(_ kind: JobKind, _ job: @escaping @Sendable () -> Void) {
            order.withLock { next in
                next &+= 1
                switch kind {
                case .read: queueCounted(job, isRead: true)
                case .write, .background: queueCounted(job, isRead: false)
                case .shortWrite, .slice: submit(isRead: false, countedWhileRunning(job))
                }
            }
        }

        private func queueCounted(_ job: @escaping @Sendable () -> Void, isRead: Bool) {
            jobs.add(1, ordering: .sequentiallyConsistent)
            submit(isRead: isRead) { [self] in
                job()
                jobs.subtract(1, ordering: .sequentiallyConsistent)
            }
        }

        /// Hands `job` to the queue as a part of the round it lands in. Every job reaches
        /// the queue here or in `runDirect`.
        private func submit(isRead: Bool, _ job: @escaping @Sendable () -> Void) {
            submitted.add(1, ordering: .sequentiallyConsistent)
            queue.async { [self] in runInRound(isRead: isRead, job) }
        }

        /// Runs one job (counted in `submitted`) on the queue and ends the round where the
        /// type's comment says.
        private func runInRound<T>(isRead: Bool, _ job: () -> T) -> T {
            if !isRead { round.end() }
            let result = job()
            round.jobs += 1
            if submitted.subtract(1, ordering: .sequentiallyConsistent).newValue == 0
                || round.jobs >= Self.roundJobLimit || round.hasWaitedLonger(than: Self.roundTimeLimit)
            {
                round.end()
            }
            return result
        }

        private func countedWhileRunning(_ job: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
            { [self] in
                jobs.add(1, ordering: .sequentiallyConsistent)
                job()
                jobs.subtract(1, ordering: .sequentiallyConsistent)
            }
        }
    }

    /// The wake-ups deferred to the end of the ioQueue's current round (see `IOScheduler`),
    /// found from a completion through the queue's specific value.
    ///
    /// `@unchecked Sendable`: `wakes`, `firstAt` and `jobs` are read and written only on
    /// the ioQueue (its jobs, and direct groups inside its `sync`), which runs one block at
    /// a time.
    final class Round: @unchecked Sendable {
        /// The key under which each ioQueue carries its round.
        static let key = DispatchSpecificKey<Round>()

        /// Wake-ups to run when the round ends, in the order they were deferred.
        private var wakes: [@Sendable () -> Void] = []
        /// When the first of `wakes` was deferred (monotonic ns).
        private var firstAt: UInt64 = 0
        /// Jobs run since the round began.
        var jobs = 0

        /// Defers `wake` to the end of the round; on the queue.
        func postpone(_ wake: @escaping @Sendable () -> Void) {
            if wakes.isEmpty { firstAt = MonotonicClock.nanoseconds() }
            wakes.append(wake)
        }

        /// Whether the first deferred wake-up has waited more than `limit` ns.
        func hasWaitedLonger(than limit: UInt64) -> Bool {
            !wakes.isEmpty && MonotonicClock.nanoseconds() &- firstAt > limit
        }

        /// Ends the round: runs the deferred wake-ups, on the queue.
        func end() {
            jobs = 0
            guard !wakes.isEmpty else { return }
            let due = wakes
            wakes.removeAll(keepingCapacity: true)
            for wake in due { wake() }
        }
    }

    /// The book's epochs at one instant: `all` is bumped by every write at enqueue and by
    /// every inline write, `inline` by inline writes only (those that do not run on the
    /// queue, so a read on the queue compares only these).
    struct Epochs: Equatable {
        var all: UInt64
        var inline: UInt64
    }

    /// What is queued on the ioQueue, and epochs that tell a disk read whether a write
    /// happened while it was reading (then it must not put its older value into memory).
    /// Only `IOScheduler` holds one.
    struct WriteBook {
        /// Writes queued or running per key; absent = 0.
        var perKey: [CacheKey: Int] = [:]
        /// Whole-cache writes (clear, removeExpired, trim) queued or running.
        var wholeCache = 0
        /// Bumped by every write at enqueue and every inline write.
        var epoch: UInt64 = 0
        /// Bumped by inline writes only (the ones that do not run on the ioQueue).
        var inlineEpoch: UInt64 = 0
        /// Journaled writes queued and not yet taken by a run, in ticket order.
        var journalQueue: [PendingWrite] = []
        /// Sets of a direct commit (`commitDirect`) under way. Their keys are not counted
        /// one by one: a commit runs as one step inside the ioQueue, its writes are not
        /// acknowledged before it ends, and a read that races them may see either value,
        /// as a read racing any unacknowledged write may. Only an inline store must not
        /// slip between a commit's table put and its memory insert (see `store`).
        var directCommits = 0

        func mustQueue(_ key: CacheKey) -> Bool {
            wholeCache > 0 || perKey[key] != nil
        }

        /// Counts a write from its enqueue: later reads of its keys (of anything, for a
        /// whole-cache write) queue behind it until `unregister`.
        mutating func register(_ scope: WriteScope) {
            switch scope {
            case .key(let key): perKey[key, default: 0] += 1
            case .keys(let keys): for key in keys { perKey[key, default: 0] += 1 }
            case .wholeCache: wholeCache += 1
            case .direct: directCommits += 1
            }
            epoch &+= 1
        }

        /// Uncounts a write once its effects are in place (or it was skipped).
        mutating func unregister(_ scope: WriteScope) {
            func release(_ key: CacheKey) {
                let left = (perKey[key] ?? 1) - 1
                perKey[key] = left > 0 ? left : nil
            }
            switch scope {
            case .key(let key): release(key)
            case .keys(let keys): keys.forEach(release)
            case .wholeCache: wholeCache -= 1
            case .direct: directCommits -= 1
            }
        }
    }

    /// What a write blocks until it has run.
    enum WriteScope {
        case key(CacheKey)
        /// Several keys written by one job (setMany): each is counted as a key write.
        case keys([CacheKey])
        case wholeCache
        /// A set of a direct commit: bumps the epoch, keeps inline stores queued while it
        /// runs, and is not counted in `writesQueued` (see `WriteBook.directCommits`).
        case direct

        /// Whether the write is in `writesQueued` (reads of its keys wait for it).
        var isCounted: Bool {
            if case .direct = self { return false }
            return true
        }
    }
}
