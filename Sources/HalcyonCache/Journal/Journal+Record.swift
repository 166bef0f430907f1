// The journal's records and how each is framed: a length and a CRC32C (with the
// segment's salt mixed in) in front of a typed payload.

extension Journal {
    /// One write, as the journal keeps it. Times are absolute (nanoseconds since 1970),
    /// never relative, so replaying a record later means the same thing.
    public enum Record: Equatable, Sendable {
        /// A stored value. `expiresAtNanos` is -1 for never. `ttlNanos` is the original
        /// time-to-live, which sliding expiration counts again; -1 when reads do not move
        /// the lifetime: never (with `expiresAtNanos` -1), or absolute (stored with a
        /// `.date`; with `expiresAtNanos` that instant). Journals of older builds never
        /// wrote -1 with a real instant (their `.date` sets carry the span left), so they
        /// replay as they always did.
        case set(key: CacheKey, flags: UInt32, version: UInt64, expiresAtNanos: Int64, ttlNanos: Int64, value: [UInt8])
        /// A removed key.
        case delete(key: CacheKey)
        /// Every key removed.
        case clear
        /// A new expiration for an existing key (-1: never), keeping its time-to-live.
        /// Written by older builds only; still replayed.
        case touch(key: CacheKey, expiresAtNanos: Int64)
        /// A new lifetime for an existing key: its end (-1: never) and its time-to-live
        /// as in `set` (-1: never or absolute). `keepsAbsolute`: the touch named no
        /// expiration, so a key whose lifetime is absolute keeps it. What every touch and
        /// write-back journals now (record type 6, beside the older `touch`).
        case lifetime(key: CacheKey, expiresAtNanos: Int64, ttlNanos: Int64, keepsAbsolute: Bool)
        /// The per-key file `name` was written directly (a value too large to journal),
        /// with `version`: replay drops any older unwritten value of that file.
        case written(name: String, version: UInt64)

        /// The key the record is about; nil for `clear` and `written` (which names a file).
        public var key: CacheKey? {
            switch self {
            case .set(let key, _, _, _, _, _), .delete(let key), .touch(let key, _), .lifetime(let key, _, _, _): return key
            case .clear, .written: return nil
            }
        }
    }

    /// The framing of records:
    ///
    /// ```
    ///  0         4         8      9
    ///  +---------+---------+------+---------------------------------+
    ///  | length  | CRC32C  | type | fields                          |
    ///  |   u32   |   u32   |  u8  | (length - 1 bytes)              |
    ///  +---------+---------+------+---------------------------------+
    ///             CRC32C over: salt (u32) ++ length (u32) ++ payload
    ///
    ///  set (1):    flags u32, version u64, expiresAt i64, ttl i64, key length u32, key, value
    ///  delete (2): key
    ///  clear (3):  nothing
    ///  touch (4):  expiresAt i64, key                     (older builds; still read)
    ///  written (5): version u64, file name
    ///  lifetime (6): options u8 (bit 0: keeps an absolute lifetime; others 0),
    ///               expiresAt i64, ttl i64, key
    /// ```
    ///
    /// All integers little-endian. `length` counts the payload (type and fields). The
    /// segment's salt in the checksum makes a record copied from another segment, or
    /// left from an older file at the same offset, fail its check.
    enum RecordCodec {
        static let frameHeaderSize = 8
        /// Larger payloads are refused on write and taken as damage on read.
        static let maximumPayload = 1 << 30

        enum Kind: UInt8 {
            case set = 1, delete = 2, clear = 3, touch = 4, written = 5, lifetime = 6
        }

        /// Appends one framed record to `out`.
        static func append(_ record: Record, salt: UInt32, to out: inout [UInt8]) {
            let value = appendHead(record, salt: salt, to: &out)
            out.append(contentsOf: value)
        }

        /// Appends a record's frame without its value bytes (the checksum covers them
        /// all the same) and returns the value, for a writer that hands the value to
        /// `writev` as its own buffer instead of copying it.
        static func appendHead(_ record: Record, salt: UInt32, to out: inout [UInt8]) -> [UInt8] {
            let start = out.count
            out.append(contentsOf: [0, 0, 0, 0, 0, 0, 0, 0])  // length and CRC, filled below
            var value: [UInt8] = []
            switch record {
            case .set(let key, let flags, let version, let expiresAt, let ttl, let bytes):
                out.append(Kind.set.rawValue)
                LittleEndian.append(UInt64(flags), to: &out, width: 4)
                LittleEndian.append(version, to: &out, width: 8)
                LittleEndian.append(UInt64(bitPattern: expiresAt), to: &out, width: 8)
                LittleEndian.append(UInt64(bitPattern: ttl), to: &out, width: 8)
                LittleEndian.append(UInt64(key.utf8.count), to: &out, width: 4)
                out.append(contentsOf: key.utf8)
                value = bytes
            case .delete(let key):
                out.append(Kind.delete.rawValue)
                out.append(contentsOf: key.utf8)
            case .clear:
                out.append(Kind.clear.rawValue)
            case .touch(let key, let expiresAt):
                out.append(Kind.touch.rawValue)
                LittleEndian.append(UInt64(bitPattern: expiresAt), to: &out, width: 8)
                out.append(contentsOf: key.utf8)
            case .written(let name, let version):
                out.append(Kind.written.rawValue)
                LittleEndian.append(version, to: &out, width: 8)
                out.append(contentsOf: name.utf8)
            case .lifetime(let key, let expiresAt, let ttl, let keepsAbsolute):
                out.append(Kind.lifetime.rawValue)
                out.append(keepsAbsolute ? 1 : 0)
                LittleEndian.append(UInt64(bitPattern: expiresAt), to: &out, width: 8)
                LittleEndian.append(UInt64(bitPattern: ttl), to: &out, width: 8)
                out.append(contentsOf: key.utf8)
            }
            let length = out.count - start - frameHeaderSize + value.count
            LittleEndian.put(UInt64(length), into: &out, at: start, width: 4)
            var saltBytes = salt.littleEndian
            var crc = withUnsafeBytes(of: &saltBytes) { CRC32C.checksum($0) }
            crc = out.withUnsafeBytes { raw in
                let lengthField = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[start..<start + 4]), continuing: crc)
                return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[(start + frameHeaderSize)...]), continuing: lengthField)
            }
            crc = CRC32C.checksum(value, continuing: crc)
            LittleEndian.put(UInt64(crc), into: &out, at: start + 4, width: 4)
            return value
        }

        /// The framed size of a record, without encoding it.
        static func framedSize(_ record: Record) -> Int {
            switch record {
            case .set(let key, _, _, _, _, let value): return frameHeaderSize + 1 + 32 + key.utf8.count + value.count
            case .delete(let key): return frameHeaderSize + 1 + key.utf8.count
            case .clear: return frameHeaderSize + 1
            case .touch(let key, _): return frameHeaderSize + 1 + 8 + key.utf8.count
            case .written(let name, _): return frameHeaderSize + 1 + 8 + name.utf8.count
            case .lifetime(let key, _, _, _): return frameHeaderSize + 1 + 17 + key.utf8.count
            }
        }

        /// CRC32C of the salt, then the length field, then the payload. `frame` starts at
        /// the length field; the CRC field (bytes 4..<8) is skipped.
        static func checksum(salt: UInt32, lengthAndPayload frame: UnsafeRawBufferPointer) -> UInt32 {
            var saltBytes = salt.littleEndian
            var crc = withUnsafeBytes(of: &saltBytes) { CRC32C.checksum($0) }
            crc = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: frame[frame.startIndex..<frame.startIndex + 4]), continuing: crc)
            return CRC32C.checksum(UnsafeRawBufferPointer(rebasing: frame[(frame.startIndex + frameHeaderSize)...]), continuing: crc)
        }

        /// What one attempt to read a record at an offset found.
        enum Decoded {
            /// A whole, valid record and the size of its frame.
            case record(Record, size: Int)
            /// Fewer bytes left than the frame says (or than a frame header): a torn write.
            case truncated
            /// A complete frame whose checksum or contents are wrong; `size` is where the
            /// next frame would start if the length field is right.
            case invalid(size: Int)
        }

        /// Decodes the record at `offset` of `bytes`.
        static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int, salt: UInt32) -> Decoded {
            let left = bytes.count - offset
            guard left >= frameHeaderSize else { return .truncated }
            let length = Int(LittleEndian.get(bytes, at: offset, width: 4))
            guard length >= 1, length <= maximumPayload else { return .invalid(size: frameHeaderSize) }
            let size = frameHeaderSize + length
            guard left >= size else { return .truncated }
            let frame = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + size])
            let stored = UInt32(LittleEndian.get(frame, at: 4, width: 4))
            guard checksum(salt: salt, lengthAndPayload: frame) == stored,
                  let record = payload(UnsafeRawBufferPointer(rebasing: frame[frameHeaderSize...]))
            else { return .invalid(size: size) }
            return .record(record, size: size)
        }

        /// Parses a payload whose checksum has passed; nil when its fields do not fit.
        private static func payload(_ p: UnsafeRawBufferPointer) -> Record? {
            guard let kind = Kind(rawValue: p[0]) else { return nil }
            let body = UnsafeRawBufferPointer(rebasing: p[1...])
            switch kind {
            case .set:
                guard body.count >= 32 else { return nil }
                let keyLength = Int(LittleEndian.get(body, at: 28, width: 4))
                guard body.count - 32 >= keyLength else { return nil }
                return .set(
                    key: CacheKey(utf8: body[32..<32 + keyLength]),
                    flags: UInt32(LittleEndian.get(body, at: 0, width: 4)),
                    version: LittleEndian.get(body, at: 4, width: 8),
                    expiresAtNanos: Int64(bitPattern: LittleEndian.get(body, at: 12, width: 8)),
                    ttlNanos: Int64(bitPattern: LittleEndian.get(body, at: 20, width: 8)),
                    value: Array(body[(32 + keyLength)...]))
            case .delete:
                return .delete(key: CacheKey(utf8: body))
            case .clear:
                return body.isEmpty ? .clear : nil
            case .touch:
                guard body.count >= 8 else { return nil }
                return .touch(key: CacheKey(utf8: body[8...]),
                              expiresAtNanos: Int64(bitPattern: LittleEndian.get(body, at: 0, width: 8)))
            case .written:
                guard body.count >= 8 else { return nil }
                return .written(name: String(decoding: body[8...], as: UTF8.self),
                                version: LittleEndian.get(body, at: 0, width: 8))
            case .lifetime:
                guard body.count >= 17, body[0] & ~1 == 0 else { return nil }
                return .lifetime(
                    key: CacheKey(utf8: body[17...]),
                    expiresAtNanos: Int64(bitPattern: LittleEndian.get(body, at: 1, width: 8)),
                    ttlNanos: Int64(bitPattern: LittleEndian.get(body, at: 9, width: 8)),
                    keepsAbsolute: body[0] & 1 != 0)
            }
        }
    }
}
