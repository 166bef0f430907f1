// The wire form of a connection's callback-queue policy (Docs/PROTOCOL.md §7), as set by
// `connection.configure` and echoed in its reply. The transport turns it into a
// HalcyonCache CallbackQueue.

import HalcyonJSON

/// How the replies of one connection are delivered.
///
/// Threading: a value type; any thread.
public enum CallbackQueuePolicy: Sendable, Equatable {
    /// Always hop to the daemon's main queue, then write.
    case mainAsync
    /// Write at once when already on the main queue, else hop to it.
    case mainCurrentOrAsync
    /// Write from whatever thread finished the work (the default).
    case untouch
    /// A connection-private DispatchQueue, serial unless `concurrent`, with this QoS name.
    case dispatch(concurrent: Bool, qos: String)
    /// A connection-private OperationQueue of this width; per-request `priority` orders
    /// queued deliveries.
    case operationQueue(maxConcurrentOperationCount: Int)

    /// The QoS names a `dispatch` policy accepts (DispatchQoS classes).
    public static let qosNames: [String] = ["background", "utility", "default", "userInitiated", "userInteractive"]

    /// Reads a policy from its JSON form:
    /// `"mainAsync"`, `"mainCurrentOrAsync"`, `"untouch"`,
    /// `{"dispatch": {"concurrent": bool = false, "qos": name = "default"}}`,
    /// `{"operationQueue": {"maxConcurrentOperationCount": n >= 1 = 1}}`.
    /// Throws `-32602 invalidCallbackQueue` naming `param` for anything else.
    public init(_ value: JSONValue, param: String = "callbackQueue") throws(RPCError) {
        func invalid(_ why: String) -> RPCError {
            .invalidParams(reason: .invalidCallbackQueue, param: param, message: "'\(param)' \(why)")
        }
        if let name = value.string {
            switch name {
            case "mainAsync": self = .mainAsync
            case "mainCurrentOrAsync": self = .mainCurrentOrAsync
            case "untouch": self = .untouch
            default: throw invalid("must be mainAsync, mainCurrentOrAsync, untouch, {\"dispatch\":…} or {\"operationQueue\":…}")
            }
            return
        }
        guard value.kind == .object, value.count == 1, let (kind, body) = value.members.first else {
            throw invalid("must be a string or an object with one member")
        }
        guard body.kind == .object else { throw invalid("'\(kind)' must be an object") }
        switch kind {
        case "dispatch":
            var concurrent = false
            var qos = "default"
            for (name, member) in body.members {
                switch name {
                case "concurrent":
                    guard let flag = member.bool else { throw invalid("dispatch.concurrent must be a boolean") }
                    concurrent = flag
                case "qos":
                    guard let text = member.string, Self.qosNames.contains(text) else {
                        throw invalid("dispatch.qos must be one of \(Self.qosNames.joined(separator: ", "))")
                    }
                    qos = text
                default:
                    throw invalid("has unknown member dispatch.\(name)")
                }
            }
            self = .dispatch(concurrent: concurrent, qos: qos)
        case "operationQueue":
            var width = 1
            for (name, member) in body.members {
                guard name == "maxConcurrentOperationCount" else {
                    throw invalid("has unknown member operationQueue.\(name)")
                }
                guard let n = member.int64, n >= 1, n <= Int64(Int32.max) else {
                    throw invalid("operationQueue.maxConcurrentOperationCount must be an integer >= 1")
                }
                width = Int(n)
            }
            self = .operationQueue(maxConcurrentOperationCount: width)
        default:
            throw invalid("has unknown kind '\(kind)'")
        }
    }

    /// Writes the policy in the same JSON form `init` reads (with defaults filled in).
    public func write(to writer: inout JSONWriter) {
        switch self {
        case .mainAsync: writer.string("mainAsync")
        case .mainCurrentOrAsync: writer.string("mainCurrentOrAsync")
        case .untouch: writer.string("untouch")
        case .dispatch(let concurrent, let qos):
            writer.beginObject()
            writer.key("dispatch")
            writer.beginObject()
            writer.key("concurrent"); writer.bool(concurrent)
            writer.key("qos"); writer.string(qos)
            writer.endObject()
            writer.endObject()
        case .operationQueue(let width):
            writer.beginObject()
            writer.key("operationQueue")
            writer.beginObject()
            writer.key("maxConcurrentOperationCount"); writer.int(width)
            writer.endObject()
            writer.endObject()
        }
    }
}

#if canImport(Dispatch)
import Dispatch

extension CallbackQueuePolicy {
    /// The `DispatchQoS` a `dispatch` policy's `qos` name stands for; `.default` for a
    /// name not in `qosNames` (which `init` never produces).
    public static func dispatchQoS(named name: String) -> DispatchQoS {
        switch name {
        case "background": return .background
        case "utility": return .utility
        case "userInitiated": return .userInitiated
        case "userInteractive": return .userInteractive
        default: return .default
        }
    }
}
#endif
