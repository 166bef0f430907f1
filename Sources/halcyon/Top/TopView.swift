// What `halcyon top` shows for one refresh: rates from the difference of two samples'
// counters over the time between them, levels from the newer sample.

/// The figures of one refresh.
///
/// Every rate is a counter's growth between the two samples divided by the seconds
/// between them, never an average since the daemon started. A counter that went down
/// (the daemon restarted between the samples) counts as growth from zero.
///
/// Threading: a value.
struct TopView {
    /// One method's requests a second and latency quantiles over the interval.
    struct Method: Equatable {
        var name: String
        var rate: Double
        /// Seconds; nil when no request of the method finished in the interval.
        var p50: Double?
        var p99: Double?
    }

    var sample: TopSample
    /// Seconds between the samples.
    var seconds: Double
    /// Methods with requests in the interval, busiest first (ties by name).
    var methods: [Method]
    /// Requests a second over every method, the view's own calls left out.
    var requestRate: Double
    /// Quantiles over every method but the view's own: seconds, nil when none.
    var p50: Double?
    var p99: Double?
    /// Reads a second (memory lookups), and the shares answered by memory, by disk, by
    /// the upstream (shared keys that memory did not hold), by none of them.
    var readRate: Double
    var memoryShare: Double?
    var diskShare: Double?
    var upstreamShare: Double?
    var missShare: Double?
    var evictionRate: Double
    var memoryEvictionRate: Double
    var diskEvictionRate: Double
    var expirationRate: Double
    var setRate: Double
    var stallRate: Double
    var upstreamReadRate: Double

    init(from old: TopSample, to new: TopSample) {
        sample = new
        seconds = max(new.time - old.time, 1e-3)
        let span = seconds
        func rate(_ path: KeyPath<TopSample, Double>) -> Double {
            Self.growth(old[keyPath: path], new[keyPath: path]) / span
        }
        var methods: [Method] = []
        var merged: [Double] = []
        var mergedBounds: [Double] = []
        for (name, histogram) in new.histograms {
            let before = old.histograms[name]
            let delta = Self.difference(before, histogram)
            var count = delta.last ?? 0
            if TopSample.ownMethods.contains(name) {
                count = max(0, count - 1)
            } else if delta.count == histogram.bounds.count {
                if merged.isEmpty {
                    merged = delta
                    mergedBounds = histogram.bounds
                } else if mergedBounds == histogram.bounds {
                    merged = zip(merged, delta).map { $0 + $1 }
                }
            }
            guard count > 0 else { continue }
            methods.append(Method(
                name: name, rate: count / span,
                p50: Self.quantile(0.5, bounds: histogram.bounds, cumulative: delta),
                p99: Self.quantile(0.99, bounds: histogram.bounds, cumulative: delta)))
        }
        self.methods = methods.sorted { $0.rate != $1.rate ? $0.rate > $1.rate : $0.name < $1.name }
        requestRate = methods.reduce(0) { $0 + $1.rate }
        p50 = Self.quantile(0.5, bounds: mergedBounds, cumulative: merged)
        p99 = Self.quantile(0.99, bounds: mergedBounds, cumulative: merged)

        let memoryHits = Self.growth(old.memory.hits, new.memory.hits)
        let lookups = memoryHits + Self.growth(old.memory.misses, new.memory.misses)
        let diskHits = min(Self.growth(old.disk.hits, new.disk.hits), lookups - memoryHits)
        let upstreamHits = min(Self.growth(old.upstreamHits, new.upstreamHits), lookups - memoryHits - diskHits)
        readRate = lookups / span
        if lookups > 0 {
            memoryShare = memoryHits / lookups
            diskShare = diskHits / lookups
            upstreamShare = new.upstreamState == nil ? nil : upstreamHits / lookups
            missShare = max(0, lookups - memoryHits - diskHits - upstreamHits) / lookups
        }
        memoryEvictionRate = rate(\.memory.evictions)
        diskEvictionRate = rate(\.disk.evictions)
        evictionRate = memoryEvictionRate + diskEvictionRate
        expirationRate = rate(\.memory.expirations) + rate(\.disk.expirations)
        setRate = rate(\.sets)
        stallRate = rate(\.journalStalls)
        upstreamReadRate = rate(\.upstreamHits) + rate(\.upstreamMisses)
    }

    /// A counter's growth; a counter that went down started again from zero.
    static func growth(_ old: Double, _ new: Double) -> Double {
        new >= old ? new - old : new
    }

    /// The interval's cumulative counts per bucket: `new` less `old`, or `new` alone
    /// when there is no `old` of the same shape or any count went down (a restart).
    static func difference(_ old: TopSample.Histogram?, _ new: TopSample.Histogram) -> [Double] {
        guard let old, old.bounds == new.bounds else { return new.cumulative }
        let delta = zip(new.cumulative, old.cumulative).map { $0 - $1 }
        return delta.contains(where: { $0 < 0 }) ? new.cumulative : delta
    }

    /// The `q` quantile of a histogram, as Prometheus's `histogram_quantile` estimates
    /// it: find the bucket holding rank q·count and interpolate linearly inside it (from
    /// 0 for the first bucket). A rank in the `+Inf` bucket answers the largest finite
    /// bound (the true value is above it). Nil when the histogram counts nothing.
    static func quantile(_ q: Double, bounds: [Double], cumulative: [Double]) -> Double? {
        guard let total = cumulative.last, total > 0, bounds.count == cumulative.count else { return nil }
        let rank = q * total
        var lowerBound = 0.0
        var lowerCount = 0.0
        for (bound, count) in zip(bounds, cumulative) {
            if count >= rank, count > lowerCount {
                if bound.isInfinite { return lowerBound }
                return lowerBound + (bound - lowerBound) * (rank - lowerCount) / (count - lowerCount)
            }
            lowerBound = bound.isInfinite ? lowerBound : bound
            lowerCount = count
        }
        return lowerBound
    }
}
