// server.metrics: the daemon's metrics as Prometheus text, a project extension of the
// protocol for `halcyon metrics` and scrapers that cannot reach an HTTP endpoint.

import HalcyonJSON

extension Dispatcher {
    /// The media type of the text `server.metrics` returns (Prometheus text format 0.0.4).
    static let metricsFormat = "text/plain; version=0.0.4"

    static let metricsMethods: [MethodSpec] = [
        MethodSpec(name: "server.metrics", params: []) { dispatcher, call throws(RPCError) in
            let text = dispatcher.facts.metricsText()
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject()
                w.field("format", Dispatcher.metricsFormat)
                w.field("text", text)
                w.endObject()
            })
            return nil
        },
    ]
}
