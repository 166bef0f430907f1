// The repeating dispatch timer behind the memory tier's clean and the hybrid cache's
// sweep. A `DispatchSourceTimer`, not a Foundation `Timer`: a `Timer` fires only on a
// thread running a run loop, which no daemon thread here does.

import Dispatch

/// A repeating timer that calls `handler` on `queue` every `interval` seconds until it is
/// cancelled or deallocated.
///
/// Threading: created on any thread; the handler runs on `queue`. `@unchecked Sendable`:
/// `source` is immutable after init, and libdispatch sources may be cancelled from any
/// thread (the source's own lock makes that safe).
final class RepeatingTimer: @unchecked Sendable {
    private let source: any DispatchSourceTimer

    /// - Parameters:
    ///   - interval: seconds between firings; the first fires one interval from now.
    init(interval: Double, leeway: DispatchTimeInterval, queue: DispatchQueue) {
        source = DispatchSource.makeTimerSource(queue: queue)
        let period = DispatchTimeInterval.nanoseconds(Int(interval * 1e9))
        source.schedule(deadline: .now() + period, repeating: period, leeway: leeway)
    }

    /// Installs `handler` and starts the timer; call once. Separate from init so an owner
    /// can store the timer first and then hand it a closure capturing itself weakly (so
    /// the owner's deinit can cancel the timer).
    func start(_ handler: @escaping @Sendable () -> Void) {
        source.setEventHandler(handler: handler)
        source.resume()
    }

    func cancel() {
        source.cancel()
    }

    deinit {
        source.cancel()
    }
}
