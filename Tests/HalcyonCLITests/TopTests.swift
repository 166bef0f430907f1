// `halcyon top`'s arithmetic: reading the daemon's Prometheus text, rates from two
// samples (with restarts between them), histogram quantiles, and the numbers it prints.

import HalcyonJSON
import Testing
@testable import halcyon

@Suite struct TopTests {
    private func sample(time: Double, configure: (inout TopSample) -> Void = { _ in }) -> TopSample {
        var sample = TopSample(
            time: time, pid: 1, startedAt: 0, cacheName: "default", version: "0", socket: "/s", uptime: time)
        configure(&sample)
        return sample
    }

    @Test func prometheusTextReadsSamplesLabelsAndEscapes() {
        let text = PrometheusText("""
            # HELP halcyon_requests_total Requests.
            # TYPE halcyon_requests_total counter
            halcyon_requests_total{method="cache.get"} 12
            halcyon_label_escapes{a="x\\"y",b="1\\n2",c="back\\\\slash"} 1.5 1700000000000

            halcyon_up 1
            halcyon_inf{le="+Inf"} +Inf
            not a sample
            halcyon_broken{a="unclosed} 3
            halcyon_novalue{a="b"}
            """)
        #expect(text.samples.count == 4)
        #expect(text.unreadLines == 3)
        #expect(text.samples(named: "halcyon_requests_total") == [
            .init(name: "halcyon_requests_total", labels: ["method": "cache.get"], value: 12),
        ])
        #expect(text.samples(named: "halcyon_label_escapes").first?.labels == ["a": "x\"y", "b": "1\n2", "c": "back\\slash"])
        #expect(text.samples(named: "halcyon_label_escapes").first?.value == 1.5)
        #expect(text.samples(named: "halcyon_up").first?.labels == [:])
        #expect(text.samples(named: "halcyon_inf").first?.value == .infinity)
    }

    @Test func histogramsAreGatheredPerMethodInBoundOrder() {
        let text = PrometheusText("""
            halcyon_request_duration_seconds_bucket{method="cache.get",le="+Inf"} 10
            halcyon_request_duration_seconds_bucket{method="cache.get",le="0.001"} 8
            halcyon_request_duration_seconds_bucket{method="cache.get",le="0.0001"} 2
            halcyon_request_duration_seconds_bucket{method="cache.set",le="+Inf"} 1
            halcyon_request_duration_seconds_bucket{method="cache.set",le="bad"} 1
            halcyon_request_duration_seconds_bucket{le="0.1"} 1
            """)
        let histograms = TopSample.histograms(text)
        #expect(histograms["cache.get"] == TopSample.Histogram(bounds: [0.0001, 0.001, .infinity], cumulative: [2, 8, 10]))
        #expect(histograms["cache.set"] == TopSample.Histogram(bounds: [.infinity], cumulative: [1]))
        #expect(histograms.count == 2)
    }

    @Test func quantilesInterpolateInsideTheirBucket() {
        let bounds = [0.001, 0.01, 0.1, Double.infinity]
        // 100 requests: 50 under 1 ms, 40 more under 10 ms, 9 under 100 ms, 1 above.
        let cumulative = [50.0, 90, 99, 100]
        #expect(TopView.quantile(0.5, bounds: bounds, cumulative: cumulative) == 0.001)
        #expect(TopView.quantile(0.25, bounds: bounds, cumulative: cumulative) == 0.0005)
        #expect(abs(TopView.quantile(0.7, bounds: bounds, cumulative: cumulative)! - 0.0055) < 1e-12)
        #expect(TopView.quantile(0.99, bounds: bounds, cumulative: cumulative) == 0.1)
        // A rank in the +Inf bucket answers the largest finite bound.
        #expect(TopView.quantile(0.999, bounds: bounds, cumulative: cumulative) == 0.1)
        #expect(TopView.quantile(0.5, bounds: bounds, cumulative: [0, 0, 0, 0]) == nil)
        #expect(TopView.quantile(0.5, bounds: bounds, cumulative: [1, 2]) == nil)
        #expect(TopView.quantile(0.5, bounds: [], cumulative: []) == nil)
    }

    @Test func countersThatWentDownStartedAgain() {
        #expect(TopView.growth(10, 25) == 15)
        #expect(TopView.growth(25, 25) == 0)
        #expect(TopView.growth(25, 7) == 7)
        let old = TopSample.Histogram(bounds: [1, .infinity], cumulative: [4, 6])
        #expect(TopView.difference(old, .init(bounds: [1, .infinity], cumulative: [5, 9])) == [1, 3])
        #expect(TopView.difference(old, .init(bounds: [1, .infinity], cumulative: [1, 2])) == [1, 2])
        #expect(TopView.difference(old, .init(bounds: [2, .infinity], cumulative: [5, 9])) == [5, 9])
        #expect(TopView.difference(nil, .init(bounds: [1, .infinity], cumulative: [5, 9])) == [5, 9])
    }

    @Test func ratesComeFromTwoSamples() {
        let bounds = [0.001, Double.infinity]
        let old = sample(time: 100) {
            $0.memory = .init(hits: 100, misses: 20, evictions: 5, expirations: 1)
            $0.disk = .init(hits: 10, evictions: 0, expirations: 1)
            $0.sets = 50
            $0.histograms = [
                "cache.get": .init(bounds: bounds, cumulative: [100, 120]),
                "cache.stats": .init(bounds: bounds, cumulative: [3, 3]),
            ]
        }
        let new = sample(time: 102) {
            $0.memory = .init(hits: 180, misses: 40, evictions: 9, expirations: 3)
            $0.disk = .init(hits: 20, evictions: 2, expirations: 1)
            $0.sets = 70
            $0.histograms = [
                "cache.get": .init(bounds: bounds, cumulative: [180, 220]),
                "cache.set": .init(bounds: bounds, cumulative: [20, 20]),
                "cache.stats": .init(bounds: bounds, cumulative: [4, 4]),
            ]
        }
        let view = TopView(from: old, to: new)
        #expect(view.seconds == 2)
        // The view's own cache.stats call is left out, so the method has no rate at all.
        #expect(view.methods.map(\.name) == ["cache.get", "cache.set"])
        #expect(view.methods.map(\.rate) == [50, 10])
        #expect(view.requestRate == 60)
        // 50 of the interval's 100 gets fall in the first bucket's 80, five-eighths of the way up.
        #expect(view.methods[0].p50 == 0.000625)
        #expect(view.readRate == 50)
        #expect(view.memoryShare == 0.8)
        #expect(view.diskShare == 0.1)
        #expect(view.upstreamShare == nil)
        #expect(view.missShare == 0.1)
        #expect(view.memoryEvictionRate == 2)
        #expect(view.diskEvictionRate == 1)
        #expect(view.evictionRate == 3)
        #expect(view.expirationRate == 1)
        #expect(view.setRate == 10)
    }

    @Test func anIdleIntervalHasNoSharesAndNoQuantiles() {
        let old = sample(time: 5)
        let view = TopView(from: old, to: old)
        #expect(view.seconds == 1e-3)
        #expect(view.methods.isEmpty)
        #expect(view.requestRate == 0)
        #expect(view.p50 == nil && view.p99 == nil)
        #expect(view.memoryShare == nil && view.missShare == nil)
    }

    @Test func upstreamNodesAreReadFromNamesOrObjects() throws {
        let upstream = try JSONValue.parse(#"""
            {"nodes": ["a:6379", "b:6379", {"address": "c:6379", "state": "connecting", "slots": 5461, "tags": []},
                       {"host": "d"}],
             "connectedNodes": ["a:6379", "d"]}
            """#).get()
        #expect(TopSample.nodes(upstream) == [
            .init(name: "a:6379", state: "connected", details: []),
            .init(name: "b:6379", state: "unreachable", details: []),
            .init(name: "c:6379", state: "connecting", details: ["slots=5461"]),
            .init(name: "d", state: "connected", details: []),
        ])
    }

    @Test func numbersPrintAsTopShowsThem() {
        #expect(TopScreen.fixed(2.25, decimals: 1) == "2.3")
        #expect(TopScreen.fixed(-2.25, decimals: 1) == "-2.3")
        #expect(TopScreen.fixed(-0.04, decimals: 1) == "0.0")
        #expect(TopScreen.fixed(1204, decimals: 1) == "1204.0")
        #expect(TopScreen.fixed(0.05, decimals: 2) == "0.05")
        #expect(TopScreen.fixed(7.5, decimals: 0) == "8")
        #expect(TopScreen.fixed(.nan, decimals: 1) == "-")
        #expect(TopScreen.rate(0) == "0.0")
        #expect(TopScreen.latency(nil) == "-")
        #expect(TopScreen.latency(0.000062) == "62µs")
        #expect(TopScreen.latency(0.0012) == "1.2ms")
        #expect(TopScreen.latency(0.025) == "25ms")
        #expect(TopScreen.latency(1.5) == "1.50s")
        #expect(TopScreen.bytes(512) == "512 B")
        #expect(TopScreen.bytes(-3) == "0 B")
        #expect(TopScreen.bytes(1024) == "1 KiB")
        #expect(TopScreen.bytes(12.3 * 1024 * 1024) == "12.3 MiB")
        #expect(TopScreen.bytes(1024 * 1024 * 1024) == "1 GiB")
    }

    @Test func theLogLineNamesEveryFigure() {
        let bounds = [0.001, Double.infinity]
        let old = sample(time: 0) { $0.histograms = ["cache.get": .init(bounds: bounds, cumulative: [0, 0])] }
        let new = sample(time: 1) {
            $0.histograms = ["cache.get": .init(bounds: bounds, cumulative: [4, 4])]
            $0.memory = .init(hits: 4, bytes: 2048)
            $0.memoryLimit = 1024 * 1024
            $0.connections = 2
        }
        #expect(TopScreen.line(TopView(from: old, to: new), clock: 1_795_428_000) == """
            2026-11-23 10:00:00 UTC requests=4.0/s p50=500µs p99=990µs reads=4.0/s memory_hits=100.0% \
            disk_hits=0.0% misses=0.0% memory=2KiB/1MiB disk=0B/unlimited evictions=0.0/s expirations=0.0/s \
            unwritten=0B unwritten_entries=0 write_queue=0 connections=2 cache.get=4.0/s
            """)
    }
}
