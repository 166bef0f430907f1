// Which of a Redis Cluster's 16384 slots a key belongs to: CRC16 (XMODEM) of the key, or
// of its hash tag, modulo 16384, exactly as the server computes it (`CLUSTER KEYSLOT`).

/// A cluster hash slot, 0..<16384.
///
/// A key's hash tag is the text between its first `{` and the first `}` after it, when
/// that text is not empty; then only the tag is hashed, so `{user:1}:name` and
/// `{user:1}:mail` share a slot (and a node, and can be used together in one script).
///
/// ```swift
/// ClusterSlot(key: Array("foo".utf8)).value          // 12182
/// ClusterSlot(key: Array("{user1}.x".utf8)) == ClusterSlot(key: Array("user1".utf8))   // true
/// ```
///
/// Threading: a value type; `Sendable`.
public struct ClusterSlot: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// How many slots a cluster has.
    public static let count = 16384

    public let value: Int

    public init(_ value: Int) {
        precondition(value >= 0 && value < ClusterSlot.count, "slot out of range")
        self.value = value
    }

    /// The slot of `key`.
    public init<Bytes: Collection<UInt8>>(key: Bytes) {
        value = Int(ClusterSlot.crc16(ClusterSlot.hashedPart(of: key)) & 0x3FFF)
    }

    /// The slot of a text key (its UTF-8 bytes).
    public init(key: String) {
        self.init(key: key.utf8)
    }

    /// The part of `key` the slot is computed from: its hash tag, or the whole key.
    public static func hashedPart<Bytes: Collection<UInt8>>(of key: Bytes) -> Bytes.SubSequence {
        if let open = key.firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = key.index(after: open)
            if let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen {
                return key[afterOpen..<close]
            }
        }
        return key[...]
    }

    /// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis uses.
    public static func crc16<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    public static func < (lhs: ClusterSlot, rhs: ClusterSlot) -> Bool { lhs.value < rhs.value }
    public var description: String { String(value) }
}
