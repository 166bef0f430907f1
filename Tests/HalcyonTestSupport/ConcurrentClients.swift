// Many clients at once against one daemon, for the tests that hammer it from threads.

import Foundation
import HalcyonCache

/// Runs `body` on `workers` threads at once (through `concurrentPerform`), each with its
/// own connection to the daemon at `socketPath`, and returns how many failures there
/// were: those `body` counts itself, plus one for each worker that could not connect or
/// threw. Counting instead of expecting inside the workers keeps every check on the
/// test's own thread.
///
/// Threading: blocks the calling thread until every worker is done; `body` runs on
/// Dispatch's worker threads, once per worker index.
public func failuresAcrossClients(
    socketPath: String, workers: Int,
    _ body: @Sendable (_ worker: Int, _ client: TestClient, _ failures: LockedCounter) throws -> Void
) -> Int {
    let failures = LockedCounter()
    DispatchQueue.concurrentPerform(iterations: workers) { worker in
        do {
            try body(worker, try TestClient(path: socketPath), failures)
        } catch {
            failures.add()
        }
    }
    return failures.value
}

/// A counter many threads can bump. Threading: thread-safe; a `Locked` box holds it.
public final class LockedCounter: Sendable {
    private let count = Locked(0)
    public init() {}
    public func add() { count.withLock { $0 += 1 } }
    public var value: Int { count.withLock { $0 } }
}

/// A value many threads may read and replace: what a test collects from callbacks that
/// run on other threads. Threading: thread-safe; a `Locked` box holds it.
public final class LockedBox<Value: Sendable>: Sendable {
    private let value: Locked<Value>
    public init(_ value: Value) { self.value = Locked(value) }
    /// Runs `body` with exclusive access; never call back into the box from it.
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R { try value.withLock(body) }
    public var current: Value { value.withLock { $0 } }
}
