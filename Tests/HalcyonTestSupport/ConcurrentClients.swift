// Many clients at once against one daemon, for the tests that hammer it from threads.

import Foundation
import HalcyonSupport

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
    _ body: @Sendable (_ worker: Int, _ client: TestClient, _ failures: Locked<Int>) throws -> Void
) -> Int {
    let failures = Locked(0)
    DispatchQueue.concurrentPerform(iterations: workers) { worker in
        do {
            try body(worker, try TestClient(path: socketPath), failures)
        } catch {
            failures.withLock { $0 += 1 }
        }
    }
    return failures.withLock { $0 }
}
