// Params that several methods read the same way. Kept in one place so those methods
// cannot drift apart in which params they honour, how a param maps onto the cache's
// options, or the order they check them in (the first bad param in that order is the
// one reported, so the order is part of the wire behaviour).

import Foundation
import HalcyonCache

extension MethodCall {
    /// The params a single-key lookup accepts: those `keyAndLookupOptions()` reads, plus
    /// `options`, which the dispatcher reads itself before the handler runs.
    static let lookupParams: ParamNames = ["key", "forcedExtension", "referenceDate", "options"]

    /// `key`, then `forcedExtension` and `referenceDate` laid over the connection's
    /// options: what cache.isCached and cache.describe take.
    ///
    /// Threading: like the call itself, on the connection's event loop thread.
    func keyAndLookupOptions() throws(RPCError) -> (key: CacheKey, options: HybridCache.Options) {
        try Self.keyAndLookupOptions(params, options)
    }

    /// `keyAndLookupOptions()` for params and options read outside a call (the memory answers).
    static func keyAndLookupOptions(
        _ params: Params, _ options: HybridCache.Options
    ) throws(RPCError) -> (key: CacheKey, options: HybridCache.Options) {
        let key = try params.key()
        var options = options
        options.forcedExtension = try params.string("forcedExtension")
        options.referenceDate = try params.date("referenceDate")
        return (key, options)
    }

    /// The connection's options with `expiration` (the disk tier's) and then
    /// `memoryExpiration` laid over them: how cache.set and cache.touch read expirations.
    ///
    /// Threading: like the call itself, on the connection's event loop thread.
    func optionsWithExpirations() throws(RPCError) -> HybridCache.Options {
        try Self.optionsWithExpirations(params, options)
    }

    /// `optionsWithExpirations()` for params and options read outside a call (the direct writes).
    static func optionsWithExpirations(
        _ params: Params, _ options: HybridCache.Options
    ) throws(RPCError) -> HybridCache.Options {
        var options = options
        options.diskExpiration = try params.expiration("expiration")
        options.memoryExpiration = try params.expiration("memoryExpiration")
        return options
    }
}
