// The per-loop request-latency histograms: method lookup, bucket placement, the sum over
// loops and the Prometheus text they render to.

import Testing
@testable import HalcyonServer

@Suite struct MetricsRequestLatenciesTests {
    @Test func methodsOfTheTableHaveTheirOwnSeriesAndOthersAreUnknown() {
        let get = RequestLatencies.index(of: "cache.get")
        #expect(RequestLatencies.methodNames[get] == "cache.get")
        let configure = RequestLatencies.index(of: "connection.configure")
        #expect(RequestLatencies.methodNames[configure] == "connection.configure")
        #expect(RequestLatencies.index(of: "cache.gets") == RequestLatencies.unknownIndex)
        #expect(RequestLatencies.index(of: "unknown") == RequestLatencies.unknownIndex)
        #expect(RequestLatencies.index(of: "") == RequestLatencies.unknownIndex)
        #expect(RequestLatencies.methodNames.last == "unknown")
    }

    /// A latency counts in the first bucket whose bound it does not exceed (Prometheus's
    /// `le`), and past the last bound only in `+Inf`.
    @Test func bucketsAreInclusiveUpperBounds() {
        let loop = RequestLatencies.Histograms()
        let get = RequestLatencies.index(of: "cache.get")
        loop.record(index: get, nanoseconds: 50_000)  // exactly 50 µs: the first bucket
        loop.record(index: get, nanoseconds: 50_001)  // just above: the 100 µs bucket
        loop.record(index: get, nanoseconds: 11_000_000_000)  // above 10 s: +Inf only
        let totals = RequestLatencies.Totals.sum([loop])[get]
        #expect(totals.cumulative.count == RequestLatencies.bounds.count + 1)
        #expect(totals.cumulative[0] == 1)
        #expect(totals.cumulative[1] == 2)
        #expect(totals.cumulative[RequestLatencies.bounds.count - 1] == 2)
        #expect(totals.count == 3)
        #expect(totals.sumNanoseconds == 50_000 + 50_001 + 11_000_000_000)
    }

    /// What two loops recorded is summed, per method, and nothing leaks to other methods.
    @Test func twoLoopsAreSummed() {
        let first = RequestLatencies.Histograms()
        let second = RequestLatencies.Histograms()
        let get = RequestLatencies.index(of: "cache.get")
        let set = RequestLatencies.index(of: "cache.set")
        first.record(index: get, nanoseconds: 70_000)
        second.record(index: get, nanoseconds: 300_000)
        second.record(index: set, nanoseconds: 2_000_000)
        let totals = RequestLatencies.Totals.sum([first, second])
        #expect(totals[get].count == 2)
        #expect(totals[get].cumulative[1] == 1)  // ≤ 100 µs
        #expect(totals[get].cumulative[3] == 2)  // ≤ 500 µs
        #expect(totals[get].sumNanoseconds == 370_000)
        #expect(totals[set].count == 1)
        let others = totals.indices.filter { $0 != get && $0 != set }
        #expect(others.allSatisfy { totals[$0].count == 0 && totals[$0].sumNanoseconds == 0 })
    }

    /// The text has the lines swift-prometheus wrote for these histograms before: bounds as
    /// its `Duration` representation, cumulative buckets, `+Inf`, `_sum` in seconds, `_count`.
    @Test func expositionKeepsTheFormat() {
        let loop = RequestLatencies.Histograms()
        let get = RequestLatencies.index(of: "cache.get")
        loop.record(index: get, nanoseconds: 200_000)
        loop.record(index: get, nanoseconds: 373_740)
        let text = RequestLatencies.exposition(RequestLatencies.Totals.sum([loop]))
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "# TYPE halcyon_request_duration_seconds histogram")
        #expect(lines.filter { $0.hasPrefix("# TYPE") }.count == 1)
        let getLines = lines.filter { $0.contains(#"method="cache.get""#) }
        #expect(getLines == [
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.00005"} 0"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.0001"} 0"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.00025"} 1"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.0005"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.001"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.002"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.005"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.01"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.025"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.05"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.1"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.25"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="0.5"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="1.0"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="2.5"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="10.0"} 2"#,
            #"halcyon_request_duration_seconds_bucket{method="cache.get",le="+Inf"} 2"#,
            #"halcyon_request_duration_seconds_sum{method="cache.get"} 0.00057374"#,
            #"halcyon_request_duration_seconds_count{method="cache.get"} 2"#,
        ])
        // Every method of the table and `unknown` has its series, zero or not.
        for method in RequestLatencies.methodNames {
            #expect(lines.contains(#"halcyon_request_duration_seconds_count{method="\#(method)"} "#
                + (method == "cache.get" ? "2" : "0")))
        }
    }
}
