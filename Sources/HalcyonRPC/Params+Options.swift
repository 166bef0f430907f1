// The per-request `options` member of cache.* params (Docs/PROTOCOL.md §6).

import Foundation
import HalcyonJSON

/// Per-request overrides of connection settings.
public struct RequestOptions: Sendable, Equatable {
    /// Read a disk hit synchronously on the reading thread (nil: the connection's setting).
    public var loadDiskFileSynchronously: Bool?
    /// The priority of this reply's delivery on an `operationQueue` policy (nil: normal).
    public var priority: Operation.QueuePriority?

    public init(loadDiskFileSynchronously: Bool? = nil, priority: Operation.QueuePriority? = nil) {
        self.loadDiskFileSynchronously = loadDiskFileSynchronously
        self.priority = priority
    }

    /// The members `options` may hold.
    static let memberNames: ParamNames = ["loadDiskFileSynchronously", "priority"]

    /// The wire names of the priorities, in order.
    public static let priorityNames: [(String, Operation.QueuePriority)] = [
        ("veryLow", .veryLow), ("low", .low), ("normal", .normal), ("high", .high), ("veryHigh", .veryHigh),
    ]
}

extension Params {
    /// The optional `options` object: `loadDiskFileSynchronously` (bool) and
    /// `priority` (`veryLow|low|normal|high|veryHigh`; `invalidPriority`). Unknown
    /// members are `unknownParam` with `data.param` like `options.priorty`.
    public func options(_ name: String = "options") throws(RPCError) -> RequestOptions {
        guard let member = value(name) else { return RequestOptions() }
        guard member.isObject else { throw .wrongType(name, expected: "object") }
        var unknown: String?
        member.forEachMember { key, _ in
            let known = RequestOptions.memberNames.contains(key)
            if !known { unknown = String(decoding: key, as: UTF8.self) }
            return known
        }
        if let unknown { throw .unknownParam("\(name).\(unknown)") }
        var options = RequestOptions()
        if let sync = member["loadDiskFileSynchronously"], !sync.isNull {
            guard let flag = sync.bool else { throw .wrongType("\(name).loadDiskFileSynchronously", expected: "boolean") }
            options.loadDiskFileSynchronously = flag
        }
        if let priority = member["priority"], !priority.isNull {
            guard let text = priority.string,
                  let match = RequestOptions.priorityNames.first(where: { $0.0 == text }) else {
                throw .invalidParams(reason: .invalidPriority, param: "\(name).priority",
                                     message: "'\(name).priority' must be veryLow, low, normal, high or veryHigh")
            }
            options.priority = match.1
        }
        return options
    }
}
