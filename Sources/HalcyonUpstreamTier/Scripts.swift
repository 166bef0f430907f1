// The Lua scripts that make each upstream write one atomic step in Redis: the value, its
// metadata hash and their lifetimes change together, or not at all. Each script names
// its keys (KEYS[1] the value, KEYS[2] its metadata), so Redis Cluster runs it on the
// slot's node; KeyLayout puts both in one slot.

import Crypto
import NIOCore

/// One script: its source and the SHA-1 `EVALSHA` names it by.
///
/// Threading: immutable; `Sendable`.
public struct Script: Sendable {
    public let source: String
    public let sha: String

    init(_ body: String) {
        source = Script.prelude + body
        let hex = Array("0123456789abcdef".utf8)
        sha = String(decoding: Insecure.SHA1.hash(data: Array(source.utf8)).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }, as: UTF8.self)
    }

    /// Helpers every script shares.
    ///
    /// `version(old)`: the next version of a key, `max(old + 1, now in microseconds)`, the same
    /// rule as the daemon's own VersionClock, so versions stay comparable and grow across
    /// hosts. `TIME` is allowed in scripts since Redis 5 (effects replication).
    ///
    /// `meta(value)`: the version, flags and sliding lifetime (or nil) of the value under
    /// KEYS[1]. When the metadata does not describe this value (its digest differs:
    /// someone `SET` the key without Halcyon, or the metadata expired first), the value is
    /// adopted as raw bytes (flags 0, no sliding lifetime) with a new version, recorded so
    /// every host agrees on it.
    ///
    /// `follow()`: gives KEYS[2] the lifetime of KEYS[1] and returns that PTTL. Its
    /// `PTTL` is also a read of KEYS[1], which makes the server track the key for the
    /// caller again after the script's own write invalidated it.
    ///
    /// `store(value, flags, lifetime, slide)`: writes value and metadata; lifetime is
    /// `never`, `keep` or milliseconds; slide is the sliding lifetime in milliseconds
    /// (metadata field `s`, for reads to count again) or empty for none (`keep` keeps it).
    static let prelude = """
        local function version(old)
          local t = redis.call('TIME')
          local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
          local o = tonumber(old or '0') or 0
          if o + 1 > now then now = o + 1 end
          return string.format('%.0f', now)
        end
        local function follow()
          local ttl = redis.call('PTTL', KEYS[1])
          if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PERSIST', KEYS[2]) end
          return ttl
        end
        local function meta(value)
          local m = redis.call('HMGET', KEYS[2], 'v', 'f', 'd', 's')
          local digest = redis.sha1hex(value)
          if m[1] and m[3] == digest then return m[1], m[2] or '0', m[4] end
          local v = version(m[1])
          redis.call('HSET', KEYS[2], 'v', v, 'f', '0', 'd', digest)
          redis.call('HDEL', KEYS[2], 's')
          follow()
          return v, '0', false
        end
        local function slides(slide)
          if slide ~= '' then redis.call('HSET', KEYS[2], 's', slide) else redis.call('HDEL', KEYS[2], 's') end
        end
        local function store(value, flags, lifetime, slide)
          local v = version(redis.call('HGET', KEYS[2], 'v'))
          if lifetime == 'keep' then redis.call('SET', KEYS[1], value, 'KEEPTTL')
          elseif lifetime == 'never' then redis.call('SET', KEYS[1], value)
          else redis.call('SET', KEYS[1], value, 'PX', lifetime) end
          redis.call('HSET', KEYS[2], 'v', v, 'f', flags, 'd', redis.sha1hex(value))
          if lifetime ~= 'keep' then slides(slide) end
          return v, follow()
        end

        """

    /// KEYS: value, meta. Returns nil, or {value, pttl, version, flags, sliding lifetime
    /// or nil}.
    static let read = Script("""
        local value = redis.call('GET', KEYS[1])
        if not value then return false end
        local v, f, s = meta(value)
        return {value, redis.call('PTTL', KEYS[1]), v, f, s}
        """)

    /// KEYS: value, meta. ARGV: value, flags, lifetime, slide. Returns {1, version, pttl}.
    static let set = Script("""
        local v, ttl = store(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
        return {1, v, ttl}
        """)

    /// KEYS: value, meta. ARGV: value, flags, lifetime, slide. Stores only when the key is
    /// absent. Returns {1, version, pttl} or {0, live version, pttl}.
    static let add = Script("""
        local live = redis.call('GET', KEYS[1])
        if live then
          local v = meta(live)
          return {0, v, redis.call('PTTL', KEYS[1])}
        end
        local v, ttl = store(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
        return {1, v, ttl}
        """)

    /// KEYS: value, meta. ARGV: value, flags, lifetime, expected version, slide. Stores only when
    /// the live version is the expected one. Returns {1, version, pttl}, {0, live
    /// version, pttl}, or {0} when the key holds nothing.
    static let compareAndSet = Script("""
        local live = redis.call('GET', KEYS[1])
        if not live then return {0} end
        local v = meta(live)
        if v ~= ARGV[4] then return {0, v, redis.call('PTTL', KEYS[1])} end
        local nv, ttl = store(ARGV[1], ARGV[2], ARGV[3], ARGV[5])
        return {1, nv, ttl}
        """)

    /// KEYS: value, meta. ARGV: delta, initial (empty: a missing key is refused), flags,
    /// lifetime. Redis's own INCRBY does the 64-bit arithmetic (Lua numbers are doubles).
    /// Returns {sum, version, pttl}, or an error reply naming `NOTINT` / `OVERFLOW` /
    /// `MISSING` (Redis 7 puts `ERR ` before a code-less script error); a refused sum
    /// leaves the key as it was.
    static let increment = Script("""
        local existed = redis.call('EXISTS', KEYS[1]) == 1
        if not existed then
          if ARGV[2] == '' then return redis.error_reply('MISSING') end
          redis.call('SET', KEYS[1], ARGV[2])
        end
        local sum = redis.pcall('INCRBY', KEYS[1], ARGV[1])
        if type(sum) == 'table' and sum.err then
          if not existed then redis.call('DEL', KEYS[1]) end
          if string.find(sum.err, 'overflow') then return redis.error_reply('OVERFLOW') end
          return redis.error_reply('NOTINT')
        end
        local lifetime = ARGV[4]
        if lifetime == 'never' or (lifetime == 'keep' and not existed) then redis.call('PERSIST', KEYS[1])
        elseif lifetime ~= 'keep' then redis.call('PEXPIRE', KEYS[1], lifetime) end
        -- A sum has no sliding lifetime unless it keeps the one it had.
        if lifetime ~= 'keep' then redis.call('HDEL', KEYS[2], 's') end
        local v = version(redis.call('HGET', KEYS[2], 'v'))
        redis.call('HSET', KEYS[2], 'v', v, 'f', ARGV[3], 'd', redis.sha1hex(tostring(redis.call('GET', KEYS[1]))))
        return {tostring(sum), v, follow()}
        """)

    /// KEYS: value, meta. ARGV: lifetime (never or milliseconds), slide. Returns {1, pttl} or {0}.
    static let touch = Script("""
        if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
        if ARGV[1] == 'never' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
        slides(ARGV[2])
        return {1, follow()}
        """)

    /// KEYS: value, meta. ARGV: version, sliding lifetime. Gives the key that lifetime
    /// again from now, only while it holds the value of that version (digest checked)
    /// written with that sliding lifetime, and while its lifetime is still the one
    /// Halcyon gave it: every Halcyon write ends both keys at the same instant
    /// (`follow`), so a key whose PTTL differs from its metadata's had its lifetime
    /// changed by another client (`PEXPIRE`, `PERSIST`), and that change stands.
    /// Returns {1, pttl} or {0}.
    static let slide = Script("""
        local m = redis.call('HMGET', KEYS[2], 'v', 'd', 's')
        if m[1] ~= ARGV[1] or m[3] ~= ARGV[2] then return {0} end
        local value = redis.call('GET', KEYS[1])
        if not value or redis.sha1hex(value) ~= m[2] then return {0} end
        if math.abs(redis.call('PTTL', KEYS[1]) - redis.call('PTTL', KEYS[2])) > 2 then return {0} end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        return {1, follow()}
        """)

    /// KEYS: value, meta. ARGV: version, lifetime (never or milliseconds), slide. Gives the
    /// key the lifetime a read asked for, only while it holds the value of that version
    /// (digest checked); unlike `slide`, a lifetime another client set does not stand in
    /// its way: the read asked for this one. Returns {1, pttl} or {0}.
    static let renew = Script("""
        local m = redis.call('HMGET', KEYS[2], 'v', 'd')
        if m[1] ~= ARGV[1] then return {0} end
        local value = redis.call('GET', KEYS[1])
        if not value or redis.sha1hex(value) ~= m[2] then return {0} end
        if ARGV[2] == 'never' then redis.call('PERSIST', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
        slides(ARGV[3])
        return {1, follow()}
        """)

    /// KEYS: value, meta. Returns 1 when the value existed. `UNLINK`: a large value is
    /// freed in the server's background, so a removal (a prefix removal or a shared clear
    /// of many keys above all) does not stall the server.
    static let remove = Script("""
        local n = redis.call('UNLINK', KEYS[1])
        redis.call('UNLINK', KEYS[2])
        return n
        """)

    /// KEYS: lease. ARGV: token, milliseconds. Returns {1} when taken, else {0, pttl}; the
    /// PTTL read makes the server track the lease key, so its end arrives as an invalidation.
    static let acquireLease = Script("""
        if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1} end
        return {0, redis.call('PTTL', KEYS[1])}
        """)

    /// KEYS: lease. ARGV: token. Deletes the lease only while the token holds it.
    static let releaseLease = Script("""
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """)
}
