// Where Halcyon keeps, in Redis, what it knows beside a value: the names of a key's
// metadata and lease keys, chosen so that they always share the key's cluster slot.

import HalcyonUpstream

/// The names of the keys Halcyon keeps beside a shared key `K`.
///
/// The value itself is stored under `K`, as a plain Redis string holding exactly its
/// bytes: `redis-cli GET K` shows them, and a value any Redis client `SET`s reads through
/// Halcyon. Beside it:
///
/// - `meta(K)` = `{T}halcyon.meta:K`, a hash with `v` (the version, decimal), `f` (the
///   flags word: the wire encoding, decimal) and `d` (the SHA-1, in hex, of the value the
///   other two describe). Its lifetime follows `K`'s.
/// - `lease(K)` = `{T}halcyon.lease:K`, a string holding the lease holder's token while a
///   lease is held, with the lease's lifetime.
///
/// `T` is the part of `K` that Redis Cluster hashes (its hash tag, or the whole key), so
/// both land in `K`'s slot and one script can touch `K` and `meta(K)` together. When
/// that part contains a `}` (a key like `a}b` with no hash tag), `T` cannot be written as
/// a tag; `T` is then the first text, in the fixed order of `slotTag(for:)`, whose slot is
/// `K`'s. Both forms are unambiguous: the first `}` of the name ends `T`, and `K` follows
/// the fixed infix whole.
///
/// Why a sibling key rather than something in the value: the value must stay exactly its
/// bytes for other clients. Why the digest: a client that knows nothing of Halcyon can
/// `SET K` without touching `meta(K)`; the digest no longer matches then, and the next
/// read gives the value a new version and flags 0 (raw bytes), so a stale version can
/// never let a `cas` through and a stale encoding never mislabels foreign bytes.
///
/// Threading: stateless; the tag table is built once, thread-safely, on first use.
public enum KeyLayout {
    public static let metaInfix = "halcyon.meta:"
    public static let leaseInfix = "halcyon.lease:"

    /// The metadata key of `key`.
    public static func meta(_ key: String) -> String { "{\(tag(of: key))}\(metaInfix)\(key)" }

    /// The lease key of `key`.
    public static func lease(_ key: String) -> String { "{\(tag(of: key))}\(leaseInfix)\(key)" }

    /// The hash tag that puts a name in `key`'s slot.
    public static func tag(of key: String) -> String {
        let hashed = ClusterSlot.hashedPart(of: Array(key.utf8))
        if !hashed.contains(UInt8(ascii: "}")) && !hashed.isEmpty {
            return String(decoding: hashed, as: UTF8.self)
        }
        return slotTag(for: ClusterSlot(key: key))
    }

    /// The first string, among the strings over `0-9A-Za-z` ordered by length and then
    /// alphabetically, whose slot is `slot`. Every slot has one of at most three characters.
    public static func slotTag(for slot: ClusterSlot) -> String { slotTags[slot.value] }

    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)

    private static let slotTags: [String] = {
        var tags = [String?](repeating: nil, count: ClusterSlot.count)
        var missing = ClusterSlot.count
        var candidates: [[UInt8]] = [[]]
        while missing > 0 {
            var longer: [[UInt8]] = []
            for prefix in candidates {
                for byte in alphabet {
                    let candidate = prefix + [byte]
                    longer.append(candidate)
                    let slot = ClusterSlot(key: candidate).value
                    if tags[slot] == nil {
                        tags[slot] = String(decoding: candidate, as: UTF8.self)
                        missing -= 1
                    }
                }
            }
            candidates = longer
        }
        return tags.map { $0! }
    }()
}
