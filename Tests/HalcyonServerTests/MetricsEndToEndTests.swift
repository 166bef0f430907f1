// The metrics seen from clients of a real daemon: request latencies recorded on several
// event loops add up in `server.metrics`, and a reply whose deferred result could not be
// encoded is recorded with its error.

import Foundation
import HalcyonJSON
import Testing

@Suite("Metrics end to end", .serialized, .timeLimit(.minutes(1)))
struct MetricsEndToEndTests {
    /// The value of the sample `name{labels}` in Prometheus text, nil when absent.
    private func sample(_ text: String, _ name: String, _ labels: String) -> Double? {
        let prefix = "\(name){\(labels)} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Double(line.dropFirst(prefix.count))
    }

    /// Four connections to a daemon with two event loops land on both loops (NIO hands
    /// accepted connections to its loops in turn); every request of every connection is in
    /// the summed histogram, and its buckets agree with its count.
    @Test func requestsOnSeveralLoopsAreSummed() throws {
        let daemon = try DaemonProcess(arguments: ["--event-loop-threads", "2"])
        defer { daemon.cleanUp() }
        let clients = try (0..<4).map { _ in try daemon.client() }
        _ = try clients[0].result("cache.set", #"{"key":"k","value":"v"}"#)
        for (index, client) in clients.enumerated() {
            for _ in 0...index { #expect(try client.result("cache.get", #"{"key":"k"}"#)["found"]?.bool == true) }
        }
        // Not in the table: counted as `unknown`.
        #expect(try clients[1].call("cache.nothing")["error"]?["code"]?.int64 == -32601)

        guard let text = try clients[3].result("server.metrics")["text"]?.string else {
            Issue.record("server.metrics has no text")
            return
        }
        let name = "halcyon_request_duration_seconds"
        let get = #"method="cache.get""#
        #expect(sample(text, name + "_count", get) == 10)  // 1 + 2 + 3 + 4
        #expect(sample(text, name + "_bucket", get + #",le="+Inf""#) == 10)
        #expect((sample(text, name + "_sum", get) ?? 0) > 0)
        #expect(sample(text, name + "_count", #"method="cache.set""#) == 1)
        #expect(sample(text, name + "_count", #"method="unknown""#) == 1)
        // Cumulative buckets never go down.
        let buckets = text.split(separator: "\n")
            .filter { $0.hasPrefix(name + "_bucket{" + get) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        #expect(buckets.count == 17)
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0 <= $1 })
        #expect(text.components(separatedBy: "# TYPE \(name) histogram").count == 2)
    }

    /// Memory answers given in one read burst are recorded when the burst ends, at one
    /// reading of the clock: every request of a pipelined run of memory gets sent in one
    /// write is in the histogram once its replies are read, with a time above zero; and
    /// the answers of a connection that closes right after its burst are recorded too.
    @Test func memoryAnswersOfOneReadBurstAreAllRecorded() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"k","value":"v","toDisk":false}"#)
        let run = 50
        let lines = (1...run).map { #"{"jsonrpc":"2.0","id":\#($0),"method":"cache.get","params":{"key":"k"}}"# + "\n" }
        try client.sendRaw(Array(lines.joined().utf8))
        let replies = try client.readReplies(run)
        #expect(replies.count == run)
        #expect(replies.values.allSatisfy { $0["result"]?["found"]?.bool == true })

        // A second connection sends a burst and closes without reading its replies.
        let closing = try daemon.client()
        try closing.sendRaw(Array(lines.prefix(10).joined().utf8))
        closing.close()

        let name = "halcyon_request_duration_seconds"
        let get = #"method="cache.get""#
        var text = ""
        // The closed connection's burst is recorded once the daemon has read it, which
        // no reply announces: each `server.metrics` call is a fresh look, for up to 10 s.
        let deadline = Date().addingTimeInterval(10)
        repeat {
            text = try client.result("server.metrics")["text"]?.string ?? ""
        } while sample(text, name + "_count", get) != Double(run + 10) && Date() < deadline
        #expect(sample(text, name + "_count", get) == Double(run + 10))
        #expect((sample(text, name + "_sum", get) ?? 0) > 0)
        #expect(sample(text, name + "_bucket", get + #",le="+Inf""#) == Double(run + 10))
    }

    /// A get answered from disk hands its value over to be encoded when the reply is
    /// written; when the value cannot be shown in the encoding asked, the reply is -32004
    /// and the request is recorded (trace log) with that error, not as ok: alone and in a
    /// batch.
    @Test func deferredEncodingFailureIsRecordedAsAnError() throws {
        let daemon = try DaemonProcess(arguments: ["--log-level", "trace", "--log-format", "json"])
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        // Not valid UTF-8; off memory, so the get is answered from disk through the ioQueue.
        _ = try client.result("cache.set", #"{"key":"raw","value":"AP8=","encoding":"base64"}"#)
        _ = try client.result("cache.remove", #"{"key":"raw","fromDisk":false}"#)
        try client.request("cache.get", #"{"key":"raw","encoding":"utf8"}"#, id: 101)
        let single = try client.readReply()
        #expect(single["error"]?["code"]?.int64 == -32004)

        _ = try client.result("cache.remove", #"{"key":"raw","fromDisk":false}"#)
        try client.send(#"[{"jsonrpc":"2.0","id":202,"method":"cache.get","params":{"key":"raw","encoding":"utf8"}}]"#)
        let batch = try client.readReply()
        #expect(batch[0]?["error"]?["code"]?.int64 == -32004)

        daemon.stop()
        let requests = daemon.stderrText().split(separator: "\n").compactMap { line -> JSONValue? in
            guard let value = try? JSONValue.parse(Array(line.utf8)).get(), value["message"]?.string == "request"
            else { return nil }
            return value
        }
        for id in ["101", "202"] {
            let get = requests.first { $0["id"]?.string == id && $0["method"]?.string == "cache.get" }
            let outcome = get?["outcome"]?.string
            #expect(outcome == "error -32004 cannotEncode", "request \(id)")
        }
    }
}
