// server.metrics: the daemon's metrics as Prometheus text, a project extension of the
// protocol for `halcyon metrics` and scrapers that cannot reach an HTTP endpoint.

import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// The handler of `server.metrics` (see the method table).
    enum MetricsMethods {
        /// The media type of the text `server.metrics` returns (Prometheus text format 0.0.4).
        static let format = "text/plain; version=0.0.4"

        static func metrics(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let text = dispatcher.facts.metricsText()
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject()
                w.field("format", MetricsMethods.format)
                w.field("text", text)
                w.endObject()
            })
            return nil
        }
    }
}
