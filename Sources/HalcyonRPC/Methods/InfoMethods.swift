// Methods that report rather than change: cache.totalSize, cache.stats, server.ping,
// server.info; and connection.configure, which changes only the caller's connection.

import Foundation
import HalcyonCache
import HalcyonJSON

extension Dispatcher {
    /// Handlers of the methods in this file, and `server.ping`'s memory answer; their specs
    /// are in `MethodTable.swift`.
    enum InfoMethods {
        /// `cache.totalSize`
        static func totalSize(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let responder = call.responder
            return dispatcher.cache.totalSize(callbackQueue: call.callbackQueue) { result in
                responder.finish(result) { (usage, w) throws(RPCError) in
                    w.beginObject(); w.field("bytes", usage.bytes); w.field("count", usage.count); w.endObject()
                }
            }
        }

        /// `cache.stats`: the whole cache's counters, and under `--access` each accounted
        /// namespace's; to a caller without the `admin` right, its own namespace's only.
        static func stats(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let namespaces = dispatcher.cache.namespaceStats()
            if let access = call.session.access, !access.rights.contains(.admin) {
                // Not an admin, so a named namespace: `*` needs the admin right.
                let own = access.namespace.map { namespace in
                    namespaces.first { $0.namespace == namespace } ?? MemoryStorage.NamespaceStats(namespace: namespace)
                }
                call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                    w.beginObject()
                    w.key("namespace")
                    if let own { own.write(to: &w) } else { w.null() }
                    w.endObject()
                })
                return nil
            }
            let stats = dispatcher.cache.stats()
            let live = dispatcher.facts.liveCounters()
            let uptime = Date().timeIntervalSince(dispatcher.facts.startedAt)
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject()
                stats.write(to: &w)
                w.field("inFlight", live.inFlight)
                w.field("connections", live.connections)
                w.field("refusedPeers", live.refusedPeers)
                w.field("outputBufferOverflows", live.outputBufferOverflows)
                w.field("linesParsedOffLoop", live.linesParsedOffLoop)
                w.field("lineTooLongRefusals", live.lineTooLongRefusals)
                w.field("inputBufferFullRefusals", live.inputBufferFullRefusals)
                w.field("uptime", Int(uptime.rounded(.down)))
                let leases = dispatcher.cache.leaseStats
                w.field("leases", leases.held)
                w.field("leaseWaiters", leases.waiting)
                w.field("leasesGranted", leases.granted)
                w.field("leasesExpired", leases.expired)
                w.field("leaseWaitersRefused", leases.refused)
                w.field("leaseWaitsTimedOut", leases.timedOut)
                if call.session.access != nil {
                    w.key("namespaces"); w.beginArray()
                    for namespace in namespaces { namespace.write(to: &w) }
                    w.endArray()
                }
                if let shared = stats.upstream {
                    w.key("upstream"); w.beginObject()
                    shared.write(to: &w)
                    w.field("leaseWaiters", dispatcher.cache.sharedLeaseWaiters)
                    w.field("pendingLeaseReleases", dispatcher.cache.pendingSharedLeaseReleases)
                    dispatcher.facts.upstream()?.writeCounters(to: &w)
                    w.endObject()
                }
                w.endObject()
            })
            return nil
        }

        /// `server.ping`
        static func serverPing(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in writePong(into: &w) })
            return nil
        }

        /// `server.ping`, at once.
        static func serverPingNow(
            _ dispatcher: Dispatcher, _ params: Params, _ options: HybridCache.Options, _ id: RPCID,
            _ writer: inout JSONWriter
        ) throws(RPCError) -> MemoryAnswerResult {
            if RPCResponseWriter.pongLine(id: id, into: &writer) { return .answered(nil) }
            return .answered(RPCResponseWriter.success(id: id, into: &writer) { (w: inout JSONWriter) throws(RPCError) in
                writePong(into: &w)
            })
        }

        /// The result of `server.ping`.
        static func writePong(into w: inout JSONWriter) {
            w.beginObject(); w.field("pong", true); w.endObject()
        }

        /// `server.info`
        static func serverInfo(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            let facts = dispatcher.facts
            let folder = dispatcher.cache.diskStorage.directoryURL.path
            let access = call.session.access
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject()
                w.field("name", "halcyond")
                w.field("cacheName", facts.cacheName)
                w.field("version", facts.version)
                w.field("protocol", 1)
                w.field("pid", Int(getpid()))
                w.field("socket", facts.socketPath)
                w.field("cacheFolder", folder)
                w.field("startedAt", roundedDown: facts.startedAt)
                w.key("limits"); w.beginObject()
                for (name, value) in facts.limits { w.key(name); w.int(value) }
                w.endObject()
                w.key("defaults"); w.beginObject()
                w.key("expiration"); w.expiration(facts.diskExpiration)
                w.key("memoryExpiration"); w.expiration(facts.memoryExpiration)
                w.key("extendingExpiration"); w.string("cacheTime")
                w.key("encoding"); w.string("utf8")
                w.endObject()
                w.field("debugMethods", facts.debugMethodsEnabled)
                if let upstream = facts.upstream() { w.key("upstream"); upstream.writeInfo(to: &w) }
                if let access { writeAccess(access, into: &w) }
                w.endObject()
            })
            return nil
        }

        /// `server.info`'s fields under `--access`: the connection's `namespace` (null for
        /// the whole keyspace) and `rights`.
        static func writeAccess(_ access: ConnectionAccess, into w: inout JSONWriter) {
            w.key("namespace")
            if let namespace = access.namespace { w.string(namespace.name) } else { w.null() }
            w.key("rights"); w.beginArray()
            for name in access.rights.names { w.string(name) }
            w.endArray()
        }

        /// `connection.configure`
        static func connectionConfigure(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            // Validate everything before changing anything, so a bad request changes nothing.
            let policy = try call.params.callbackQueuePolicy("callbackQueue")
            let sync = try call.params.bool("loadDiskFileSynchronously")
            let extending = try call.params.extending("extendingExpiration")
            let session = call.session
            if let policy { session.setPolicy(policy) }
            if let sync { session.loadDiskFileSynchronously = sync }
            if let extending { session.extendingExpiration = extending }
            let shownPolicy = session.policy
            let shownSync = session.loadDiskFileSynchronously
            let shownExtending = session.extendingExpiration
            // The reply to a configure travels through the policy it replaces: the one the
            // request arrived under.
            call.responder.deliverNow(.success(id: call.id) { (w: inout JSONWriter) throws(RPCError) in
                w.beginObject()
                w.key("callbackQueue"); shownPolicy.write(to: &w)
                w.field("loadDiskFileSynchronously", shownSync)
                w.key("extendingExpiration"); w.extending(shownExtending)
                w.endObject()
            })
            return nil
        }

        /// `debug.sleep`
        // Holds a queue for a while so tests can line requests up behind it, as Redis's
        // DEBUG SLEEP does. `on: "ioQueue"` (default) holds every write and disk read;
        // `on: "callbackQueue"` holds this connection's reply delivery instead.
        static func debugSleep(_ dispatcher: Dispatcher, _ call: MethodCall) throws(RPCError) -> CacheTask? {
            guard let seconds = try call.params.double("seconds") else {
                throw .missingParam("seconds")
            }
            guard seconds >= 0, seconds <= 60 else {
                throw .invalidParams(reason: .outOfRange, param: "seconds", message: "seconds must be within 0...60")
            }
            let id = call.id
            let reply: @Sendable () -> RPCReply = {
                .success(id: id) { (w: inout JSONWriter) throws(RPCError) in
                    w.beginObject(); w.key("slept"); w.double(seconds); w.endObject()
                }
            }
            switch try call.params.string("on") ?? "ioQueue" {
            case "ioQueue":
                let responder = call.responder
                return dispatcher.cache.debugSleep(seconds: seconds, callbackQueue: call.callbackQueue) { result in
                    switch result {
                    case .success: responder.respond(reply())
                    case .failure(let error): responder.respond(.error(id: id, RPCError(error)))
                    }
                }
            case "callbackQueue":
                let respond = call.responder.respond
                let callbackQueue = call.callbackQueue
                let priority = call.options.priority
                if case .untouch = callbackQueue {
                    // `untouch` delivers on the caller's thread, here an event loop that other
                    // connections share: sleep elsewhere, then deliver as `untouch` would.
                    DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { respond(reply()) }
                } else {
                    callbackQueue.execute(priority: priority) {
                        Thread.sleep(forTimeInterval: seconds)
                        respond(reply())
                    }
                }
                return nil
            default:
                throw .invalidParams(reason: .invalidValue, param: "on", message: "'on' must be \"ioQueue\" or \"callbackQueue\"")
            }
        }
    }
}

extension UpstreamStats {
    /// The storage engine's half of `cache.stats`'s `upstream` member (fields only).
    func write(to w: inout JSONWriter) {
        w.field("hits", hits); w.field("misses", misses)
        w.field("invalidations", invalidations); w.field("flushes", flushes)
        w.field("unavailable", unavailable); w.field("refused", refused)
        w.field("staleCopiesRefused", staleCopiesRefused); w.field("queuedBehindWrite", queuedBehindWrite)
        w.field("slides", slides); w.field("slidesRefused", slidesRefused)
        w.field("leaseWaitersRefused", leaseWaitersRefused)
    }
}

extension JSONWriter {
    /// One tier's member of `cache.stats` (whole cache or namespace): its reads, what it
    /// holds, its evictions, and `last` (expirations, or a namespace's quota).
    mutating func tierCounters(
        _ tier: StaticString, hits: Int, misses: Int, bytes: UInt64, entries: Int, evictions: Int,
        last: (StaticString, Int)
    ) {
        key(tier); beginObject()
        field("hits", hits); field("misses", misses)
        field("bytes", bytes); field("entries", entries)
        field("evictions", evictions); field(last.0, last.1)
        endObject()
    }
}

extension MemoryStorage.NamespaceStats {
    /// One namespace's block of `cache.stats`: its name, its memory tier counters and
    /// quota, its disk tier's occupancy, evictions and quota, and its stores.
    func write(to w: inout JSONWriter) {
        w.beginObject()
        w.field("name", namespace.name)
        w.tierCounters("memory", hits: hits, misses: misses, bytes: UInt64(totalCost), entries: count,
                       evictions: evictions, last: ("quota", quota))
        w.key("disk"); w.beginObject()
        w.field("bytes", diskBytes); w.field("entries", diskEntries)
        w.field("evictions", diskEvictions); w.field("quota", diskQuota)
        w.endObject()
        w.field("sets", sets)
        w.endObject()
    }
}

extension CacheStats {
    /// The counters as `cache.stats` shows them: one object per tier, and the totals a
    /// user checks first (evictions and expirations, so no limit loses data silently).
    func write(to w: inout JSONWriter) {
        w.tierCounters("memory", hits: memoryHits, misses: memoryMisses, bytes: UInt64(memoryBytes),
                       entries: memoryEntries, evictions: memoryEvictions, last: ("expirations", memoryExpirations))
        w.tierCounters("disk", hits: diskHits, misses: diskMisses, bytes: diskBytes, entries: diskEntries,
                       evictions: diskEvictions, last: ("expirations", diskExpirations))
        // Totals only where they add up: a read that missed memory and then hit disk is
        // one memory miss and one disk hit, so an overall "misses" would be ambiguous.
        w.field("sets", sets)
        w.field("removals", removals)
        w.field("evictions", memoryEvictions + diskEvictions)
        w.field("expirations", memoryExpirations + diskExpirations)
        w.field("writesQueued", writesQueued)
        w.field("maintenanceErrors", maintenanceErrors)
        w.field("extensionWriteBacks", extensionWriteBacks)
        w.field("sweeps", sweeps)
        if let j = journal {
            w.key("journal"); w.beginObject()
            w.field("bytes", j.bytes)
            w.field("unwrittenEntries", j.unwrittenEntries); w.field("unwrittenBytes", j.unwrittenBytes)
            w.field("filesWritten", j.filesWritten); w.field("fileWriteFailures", j.fileWriteFailures)
            w.field("droppedEntries", j.droppedEntries)
            w.field("directWrites", j.directWrites)
            w.field("groups", j.groups); w.field("records", j.records); w.field("largestGroup", j.largestGroup)
            w.field("syncs", j.syncs); w.field("syncFailures", j.syncFailures)
            w.field("lastSyncLagMicros", Int(j.lastSyncLagMillis * 1000)); w.field("maxSyncLagMicros", Int(j.maxSyncLagMillis * 1000))
            w.field("failedAppends", j.failedAppends); w.field("journalRebuilds", j.journalRebuilds)
            w.field("recordsCopiedForward", j.recordsCopiedForward)
            w.field("stalls", j.stalls); w.field("backlogRefusals", j.backlogRefusals)
            w.field("checkpoints", j.checkpoints); w.field("segmentsDeleted", j.segmentsDeleted)
            w.field("replayedRecords", j.replayedRecords); w.field("replayMicros", Int(j.replayMillis * 1000))
            w.endObject()
        }
    }
}
