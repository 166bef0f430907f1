// Request latencies, kept per event loop and summed when read: the per-request path of the
// metrics touches no process-wide lock and no cache line another loop writes.
// swift-prometheus's histogram takes a lock per series on every record and cannot be fed
// pre-aggregated buckets, so this file also writes the series' Prometheus text itself, in
// the same form swift-prometheus writes histograms.

import HalcyonCache
import HalcyonRPC
import HalcyonSupport
import Prometheus
import Synchronization

/// The `halcyon_request_duration_seconds{method}` histograms.
///
/// Each event loop owns a `Histograms` (through its `LoopCounters`); a request is recorded
/// into the histograms of the loop its connection runs on, on that loop's thread. A scrape
/// sums every loop's (`Totals`) and writes the text (`exposition`).
///
/// ```
/// loop 1: Histograms ─┐
/// loop 2: Histograms ─┼─ Totals.sum ─► exposition ─► Metrics.render
/// loop n: Histograms ─┘
/// ```
enum RequestLatencies {
    /// The series' method labels: every method of the table, in table order, then
    /// `unknown` for names outside it (so a client cannot grow the series at will).
    static let methodNames = Dispatcher.methodNames + ["unknown"]
    /// The index of `unknown` in `methodNames`.
    static let unknownIndex = methodNames.count - 1
    /// The bucket bounds (`Metrics.latencyBuckets`) in nanoseconds, ascending.
    static let bounds: [Int] = Metrics.latencyBuckets.map { bucket in
        Int(bucket.components.seconds) * 1_000_000_000 + Int(bucket.components.attoseconds / 1_000_000_000)
    }
    /// `Series.counts` holds one slot per bound and one past the last (`+Inf`).
    static let slots = 17

    /// The index in `methodNames` of `method`, or `unknownIndex`. A request carries its
    /// own (`RPCRequest.spec`), found when it was parsed.
    static func index(of method: String) -> Int {
        MethodSpec.index(of: method) ?? unknownIndex
    }

    /// One method's histogram on one loop.
    ///
    /// Threading: thread-safe. Written by the owning loop's thread, read by scrapes on any
    /// thread, all with relaxed atomics: a read is a recent count, not a snapshot across
    /// slots (`Totals` derives `count` from the slots it read, so `+Inf` and `_count`
    /// always agree with the buckets).
    final class Series: Sendable {
        /// Requests per bucket, not cumulative: slot `i` counts latencies in
        /// `(bounds[i-1], bounds[i]]`, the last slot those above every bound.
        let counts: InlineArray<17, Atomic<Int>>
        /// The sum of every recorded latency, in nanoseconds.
        let sumNanoseconds = Atomic<Int>(0)

        init() {
            precondition(RequestLatencies.bounds.count + 1 == RequestLatencies.slots,
                         "Series.counts has one slot per latency bucket and one for +Inf")
            counts = InlineArray { _ in Atomic(0) }
        }

        func record(nanoseconds: Int) {
            let bounds = RequestLatencies.bounds
            var slot = 0
            // Most requests land in the first buckets: scanning up from the smallest is
            // shorter than a binary search for them.
            while slot < bounds.count, nanoseconds > bounds[slot] { slot += 1 }
            counts[slot].wrappingAdd(1, ordering: .relaxed)
            sumNanoseconds.wrappingAdd(nanoseconds, ordering: .relaxed)
        }
    }

    /// The histograms of one event loop, one `Series` per entry of `methodNames`.
    ///
    /// Threading: thread-safe (immutable; each `Series` is). Recorded into only by the
    /// loop that owns it, so no two threads write the same cache line per request (an
    /// uncontended atomic add costs a few nanoseconds).
    ///
    /// Immortal (`Immortal`), and so its series, which it holds: every request names its
    /// loop's histograms (`Observer.Request`) without counting a reference to them, so they
    /// must outlive every request, including one whose reply arrives after its daemon
    /// stopped. A daemon makes one per event loop; a test that makes more keeps each until
    /// it exits.
    final class Histograms: Sendable {
        let series: [Series]
        /// `series`, reached without counting a reference (each is kept by `series`).
        private let unmanaged: [Unmanaged<Series>]

        init() {
            series = RequestLatencies.methodNames.map { _ in Series() }
            unmanaged = series.map { Unmanaged.passUnretained($0) }
            Immortal.keep(self)
        }

        /// Records one request of the method at `index` (see `RequestLatencies.index(of:)`).
        func record(index: Int, nanoseconds: Int) {
            unmanaged[index]._withUnsafeGuaranteedRef { $0.record(nanoseconds: nanoseconds) }
        }
    }

    /// One method's histogram summed over the loops.
    struct Totals: Equatable {
        /// Cumulative counts per bound (`le`), ascending; the last is `+Inf`, i.e. `count`.
        var cumulative: [Int]
        var sumNanoseconds: Int
        var count: Int { cumulative.last ?? 0 }

        /// Every method's totals over `loops`, indexed as `methodNames`.
        static func sum(_ loops: [Histograms]) -> [Totals] {
            (0..<RequestLatencies.methodNames.count).map { index in
                var slots = [Int](repeating: 0, count: RequestLatencies.slots)
                var sum = 0
                for loop in loops {
                    let series = loop.series[index]
                    for slot in 0..<RequestLatencies.slots {
                        slots[slot] &+= series.counts[slot].load(ordering: .relaxed)
                    }
                    sum &+= series.sumNanoseconds.load(ordering: .relaxed)
                }
                var running = 0
                let cumulative = slots.map { running &+= $0; return running }
                return Totals(cumulative: cumulative, sumNanoseconds: sum)
            }
        }
    }

    static let seriesName = "halcyon_request_duration_seconds"

    /// The Prometheus text (0.0.4) of the summed histograms: one `# TYPE` line, then per
    /// method its buckets (`le` as swift-prometheus writes a `Duration` bound, `+Inf`
    /// last), `_sum` in seconds and `_count`.
    static func exposition(_ totals: [Totals]) -> String {
        var text = "# TYPE \(seriesName) histogram\n"
        let bounds = Metrics.latencyBuckets.map(\.bucketRepresentation) + ["+Inf"]
        for (index, method) in methodNames.enumerated() {
            let total = totals[index]
            // Method names come from the table (and `unknown`): nothing to escape.
            let label = "method=\"\(method)\""
            for (slot, bound) in bounds.enumerated() {
                text += "\(seriesName)_bucket{\(label),le=\"\(bound)\"} \(total.cumulative[slot])\n"
            }
            let sum = Duration.nanoseconds(Int64(total.sumNanoseconds)).bucketRepresentation
            text += "\(seriesName)_sum{\(label)} \(sum)\n"
            text += "\(seriesName)_count{\(label)} \(total.count)\n"
        }
        return text
    }
}
