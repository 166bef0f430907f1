// The per-connection settings a client changes with `connection.configure`.

import HalcyonCache
import Foundation
import Synchronization

/// The settings of one client connection: how its replies are delivered and whether its
/// disk reads run synchronously on the reading thread.
///
/// Threading: owned by one connection and confined to that connection's event loop
/// thread; the dispatcher reads and changes it only from there, while handling a
/// request. Replies capture the `CallbackQueue` value current at dispatch, so a later
/// change never reroutes a reply already under way. Its settings are
/// `@exclusivity(unchecked)`: each is a plain value read or replaced whole, never held
/// `inout` across a call, so the runtime's access checks (read on every request) guard
/// nothing.
public final class ConnectionSession {
    /// The policy as the client wrote it, echoed back by `connection.configure`.
    @exclusivity(unchecked) public private(set) var policy: CallbackQueuePolicy = .untouch
    /// The queue that delivers this connection's replies (built from `policy`).
    @exclusivity(unchecked) public private(set) var callbackQueue: CallbackQueue = .untouch
    /// Disk reads of this connection run on the reading thread instead of the ioQueue.
    @exclusivity(unchecked) public var loadDiskFileSynchronously = false
    /// How this connection's reads extend lifetimes when a request does not say
    /// (`extendingExpiration` of cache.get, cache.getMany and cache.lease). A client whose
    /// lifetimes count from the write (a framework's cache timeout) sets `.none` once.
    @exclusivity(unchecked) public var extendingExpiration: ExpirationExtending = .cacheTime
    /// A short name for logs ("pid 123 uid 1000").
    public let peerDescription: String
    /// Unique per connection in this process: the owner of the connection's leases.
    public let id: UInt64
    /// The connection's namespace and rights, resolved once when it was accepted by a
    /// daemon run with `--access`; nil without `--access` (one keyspace, every right).
    public let access: ConnectionAccess?

    public init(peerDescription: String = "unknown peer", access: ConnectionAccess? = nil) {
        self.peerDescription = peerDescription
        self.access = access
        id = ConnectionSession.ids.wrappingAdd(1, ordering: .relaxed).newValue
    }

    private static let ids = Atomic<UInt64>(0)

    /// Replaces the delivery policy. A `dispatch` or `operationQueue` policy gets a queue
    /// private to this connection, so one slow client cannot hold another's replies.
    public func setPolicy(_ newPolicy: CallbackQueuePolicy) {
        policy = newPolicy
        callbackQueue = newPolicy.makeCallbackQueue(label: "halcyon.connection.\(peerDescription)")
    }
}

extension CallbackQueuePolicy {
    /// Builds the queue this policy names. Each call makes a fresh private queue for the
    /// `dispatch` and `operationQueue` forms.
    public func makeCallbackQueue(label: String) -> CallbackQueue {
        switch self {
        case .mainAsync: return .mainAsync
        case .mainCurrentOrAsync: return .mainCurrentOrAsync
        case .untouch: return .untouch
        case .dispatch(let concurrent, let qos):
            let queue = DispatchQueue(
                label: label + ".callbackQueue",
                qos: Self.dispatchQoS(named: qos),
                attributes: concurrent ? [.concurrent] : []
            )
            return .dispatch(queue)
        case .operationQueue(let width):
            let queue = OperationQueue()
            queue.name = label + ".operationQueue"
            queue.maxConcurrentOperationCount = width
            return .operationQueue(queue)
        }
    }
}
