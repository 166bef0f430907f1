// The conditional and read-modify-write stores: add (set-if-absent), cas
// (compare-and-set on the version) and incr. Each is one step on the ioQueue (a job of
// its own, or a step of its caller's direct commit, `commitDirect`) that decides from the
// key's live entry and then applies a plain `.store` through `perform`, so it is atomic
// with every other write and journals like any store.

import Foundation

extension LocalStore {

    /// What `liveEntry` found.
    struct LiveEntry {
        var entry: CacheEntry
        /// The entry's lifetime; `Date.distantFuture` for never.
        var expiresAt: Date
        /// False when the lifetime is absolute (no read moves it).
        var slides: Bool
    }

    /// `HybridCache.add` of a local key (see there).
    @discardableResult
    func add(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options = .init(), callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return conditionalStore(
            entry, forKey: key, options: options, callbackQueue: callbackQueue, completion: completion, when: LocalStore.isAbsent)
    }

    /// `HybridCache.compareAndStore` of a local key (see there).
    @discardableResult
    func compareAndStore(
        _ entry: CacheEntry, forKey key: CacheKey, version: UInt64, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return conditionalStore(
            entry, forKey: key, options: options, callbackQueue: callbackQueue, completion: completion,
            when: LocalStore.hasVersion(version))
    }

    /// `HybridCache.increment` of a local key (see there).
    @discardableResult
    func increment(
        forKey key: CacheKey, by delta: Int64, initial: Int64? = 0, flags: UInt32, options: Options = .init(),
        callbackQueue: CallbackQueue = .untouch,
        completion: (@Sendable (Result<IncrementOutcome, CacheError>) -> Void)? = nil
    ) -> CacheTask {
        return enqueue(
            write: .key(key), callbackQueue, options.priority, short: journalsDirectly(options, valueSize: LocalStore.incrementValueSize),
            completion
        ) { [self] in
            applyUpdate(forKey: key, forcedExtension: options.forcedExtension) {
                decideIncrement(forKey: key, by: delta, initial: initial, flags: flags, options: options, live: $0)
            }
        }
    }

    /// `add`'s condition: the key holds no live entry.
    @Sendable static func isAbsent(_ live: LiveEntry?) -> Bool { live == nil }

    /// `compareAndStore`'s condition: the live entry has `version`.
    static func hasVersion(_ version: UInt64) -> @Sendable (LiveEntry?) -> Bool {
        { $0?.entry.version == version }
    }

    /// The most bytes an increment stores: an Int64 in decimal, with its sign.
    static let incrementValueSize = 20

    /// What an update (`add`, `compareAndStore`, `increment`) decided from its key's live
    /// entry: its answer, or the store to apply and how the store's result reads.
    enum UpdateDecision<T> {
        case answer(T)
        case store(WriteOperation, (StoreResult) -> T)
    }

    /// `increment`'s decision on the key's live entry.
    func decideIncrement(
        forKey key: CacheKey, by delta: Int64, initial: Int64?, flags: UInt32, options: Options, live: LiveEntry?
    ) -> UpdateDecision<IncrementOutcome> {
        let current: Int64
        var flags = flags
        if let live {
            guard let parsed = LocalStore.decimalInteger(live.entry.bytes) else { return .answer(.notAnInteger) }
            current = parsed
            // The sum is stored as the caller stored the number: a reader that wrote bytes
            // reads bytes back, not a JSON integer it never wrote.
            flags = live.entry.flags
        } else if let initial {
            current = initial
        } else {
            return .answer(.missing)
        }
        let (sum, overflow) = current.addingReportingOverflow(delta)
        if overflow { return .answer(.overflow) }
        var storeOptions = options
        if storeOptions.diskExpiration == nil, let live {
            storeOptions.diskExpiration = live.expiresAt == .distantFuture ? .never : .date(live.expiresAt)
            if storeOptions.memoryExpiration == nil, !storeOptions.toDisk {
                storeOptions.memoryExpiration = storeOptions.diskExpiration
            }
        }
        let entry = CacheEntry(bytes: Array(String(sum).utf8), flags: flags)
        var operation = storeOperation(entry, forKey: key, options: storeOptions)
        if options.diskExpiration == nil, let live, live.slides, case .store(var s) = operation {
            // The live lifetime's instant, still sliding: the sum does not make it absolute.
            s.keepsSliding = true
            operation = .store(s)
        }
        return .store(operation) { r in
            .incremented(value: sum, version: r.version ?? 0, expiresAt: r.expiresAt)
        }
    }

    /// `add`'s and `compareAndStore`'s decision: store `entry` when `condition` holds for
    /// the key's live entry. When the key held no live entry and `condition` held (an
    /// `add`), the answer is `stored` even if the expiration was already over and the
    /// store kept nothing: the key was absent, so the add took place and its entry ended
    /// at once (memcached and Django's `add` with a zero timeout). `version` is then nil.
    func decideConditionalStore(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options, live: LiveEntry?, when condition: (LiveEntry?) -> Bool
    ) -> UpdateDecision<ConditionalStoreResult> {
        guard condition(live) else {
            return .answer(ConditionalStoreResult(
                stored: false, version: live?.entry.version, expiresAt: live.flatMap { HybridCache.optionalDate($0.expiresAt) }))
        }
        let wasAbsent = live == nil
        return .store(storeOperation(entry, forKey: key, options: options)) { r in
            ConditionalStoreResult(stored: r.stored || wasAbsent, version: r.version, expiresAt: r.expiresAt)
        }
    }

    /// An update's step in its own ioQueue job: decides on the key's live entry, then
    /// applies the store it decided on. ioQueue only, from a job counted in the write book.
    func applyUpdate<T>(
        forKey key: CacheKey, forcedExtension: String?, _ decide: (LiveEntry?) -> UpdateDecision<T>
    ) -> Result<T, CacheError> {
        let live: LiveEntry?
        do throws(CacheError) {
            live = try liveEntry(forKey: key, forcedExtension: forcedExtension)
        } catch {
            return .failure(error)
        }
        switch decide(live) {
        case .answer(let answer):
            return .success(answer)
        case .store(let operation, let read):
            return applyInJob([operation])[0].map { read(LocalStore.storeResult($0)) }
        }
    }

    // MARK: Helpers

    private func conditionalStore(
        _ entry: CacheEntry, forKey key: CacheKey, options: Options, callbackQueue: CallbackQueue,
        completion: (@Sendable (Result<ConditionalStoreResult, CacheError>) -> Void)?,
        when condition: @escaping @Sendable (LiveEntry?) -> Bool
    ) -> CacheTask {
        enqueue(
            write: .key(key), callbackQueue, options.priority, short: journalsDirectly(options, valueSize: entry.bytes.count),
            completion
        ) { [self] in
            applyUpdate(forKey: key, forcedExtension: options.forcedExtension) {
                decideConditionalStore(entry, forKey: key, options: options, live: $0, when: condition)
            }
        }
    }

    /// The live entry under `key`, as a write deciding on it must see it: memory, then
    /// the disk, without extending, putting back or counting a hit. A disk tier that is
    /// not ready holds nothing.
    ///
    /// - Important: only on the ioQueue (a write decides on what is there when it runs).
    func liveEntry(forKey key: CacheKey, forcedExtension: String?) throws(CacheError) -> LiveEntry? {
        scheduler.assertOnQueue()
        if let (entry, meta) = memoryStorage.valueAndMeta(forKey: key, extendingExpiration: ExpirationExtending.none) {
            return LiveEntry(entry: entry, expiresAt: meta.expiration, slides: !meta.isAbsolute)
        }
        // A journaled write not yet in its file is newer than the file: the file must not answer.
        switch unwrittenLookup(forKey: key, forcedExtension: forcedExtension, at: config.disk.clock.now()) {
        case .live(let e): return LiveEntry(entry: e.entry, expiresAt: e.expiresAt, slides: !e.isAbsolute)
        case .expired: return nil
        case .absent: break
        }
        guard diskStorage.isReady else { return nil }
        guard let (entry, meta) = try diskStorage.valueAndMeta(
            forKey: key, extendingExpiration: ExpirationExtending.none, forcedExtension: forcedExtension)
        else { return nil }
        return LiveEntry(entry: entry, expiresAt: meta.expiration, slides: !meta.isAbsolute)
    }

    /// `bytes` as a JSON integer (`-?(0|[1-9][0-9]*)`) that fits an Int64; nil otherwise.
    static func decimalInteger(_ bytes: [UInt8]) -> Int64? {
        var digits = bytes[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard let first = digits.first, (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(first),
              first != UInt8(ascii: "0") || digits.count == 1
        else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0") ... UInt8(ascii: "9")).contains(byte) else { return nil }
            let digit = Int64(byte - UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
            if o1 || o2 { return nil }
            value = next
        }
        return value
    }
}
