// Reading a cache file's header and key, checking them against the file's size and the
// key asked for, and removing a file found damaged. Shared by lookups and the key listing.

import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStorage.Backend {
    /// What the header of an open cache file said, and where its value is.
    struct OpenedFile {
        var flags: UInt32
        var version: UInt64
        /// The TTL recorded in a format-2 header; nil for format 1.
        var ttlNanos: Int64?
        var valueOffset: Int
        var valueSize: Int
        /// The CRC32C to check the value against; nil for format 1 (which has none).
        var checksum: UInt32?
        /// The header's bytes (format 2), for the checksum.
        var headerBytes: [UInt8]
        /// The stored key (format 2); empty for format 1.
        var keyBytes: [UInt8]
        /// False for format 1: the file does not say which key it holds.
        var hasKey: Bool
    }

    enum HeaderRead {
        case found(OpenedFile)
        /// Not a file of this tier, or a file for another key: a miss, left in place.
        case miss
        /// Damaged: the caller counts it and removes it.
        case corrupt
    }

    /// How many bytes the first read of a file takes: the header and a key of up to
    /// 208 bytes, so almost every lookup gets both in one `pread`.
    static let headerProbeSize = DiskStorage.FileHeader.size + 208

    /// Reads and checks the header (and the key) of the regular file open on `fd`.
    /// - Parameter key: the key the caller looks up; a format-2 file holding another key
    ///   is a miss. Nil accepts any key (the listing).
    func readHeader(fd: Int32, path: String, status: POSIX.Status, key: CacheKey?) throws(CacheError) -> HeaderRead {
        // Nothing this tier writes is shorter than the format-1 header: a shorter file
        // is one cut short (issue: "a truncated file with its header intact").
        guard status.fileSize >= UInt64(DiskFileHeader.size) else { return .corrupt }
        let probe = Int(min(status.fileSize, UInt64(Self.headerProbeSize)))
        var readError: Int32 = 0
        let prefix = [UInt8](unsafeUninitializedCapacity: probe) { buffer, initialized in
            switch POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(buffer), from: 0) {
            case .success(let n): initialized = n
            case .failure(let e): initialized = 0; readError = e.code
            }
        }
        if readError != 0 { throw .cannotLoadDataFromDisk(path: path, errno: readError) }
        guard prefix.count == probe else { return .corrupt }  // shrunk between fstat and read

        let decoded = prefix.withUnsafeBytes { DiskStorage.FileHeader.decode($0) }
        switch decoded {
        case .foreign:
            return .miss
        case .corrupt:
            return .corrupt
        case .v1(let flags):
            return .found(OpenedFile(
                flags: flags, version: 0, ttlNanos: nil, valueOffset: DiskFileHeader.size,
                valueSize: Int(status.fileSize) - DiskFileHeader.size, checksum: nil,
                headerBytes: [], keyBytes: [], hasKey: false))
        case .v2(let header):
            guard header.valueLength <= UInt64(Int.max / 2), header.fileSize == status.fileSize else { return .corrupt }
            let headerSize = DiskStorage.FileHeader.size
            let keyEnd = headerSize + Int(header.keyLength)
            let keyBytes: [UInt8]
            if keyEnd <= prefix.count {
                keyBytes = Array(prefix[headerSize..<keyEnd])
            } else {
                var complete = false
                keyBytes = [UInt8](unsafeUninitializedCapacity: Int(header.keyLength)) { buffer, initialized in
                    switch POSIX.readFully(fd, into: UnsafeMutableRawBufferPointer(buffer), from: headerSize) {
                    case .success(let n): initialized = n; complete = n == buffer.count
                    case .failure(let e): initialized = 0; readError = e.code
                    }
                }
                if readError != 0 { throw .cannotLoadDataFromDisk(path: path, errno: readError) }
                guard complete else { return .corrupt }
            }
            if let key, !keyBytes.elementsEqual(key.utf8) { return .miss }
            return .found(OpenedFile(
                flags: header.flags, version: header.version, ttlNanos: header.ttlNanos, valueOffset: keyEnd,
                valueSize: Int(header.valueLength), checksum: header.checksum,
                headerBytes: Array(prefix[0..<headerSize]), keyBytes: keyBytes, hasKey: true))
        }
    }

    /// What `readExpected` found.
    enum ExpectedRead {
        /// A format-2 file of `key` whose checksum holds: its header and its value.
        case loaded(OpenedFile, [UInt8])
        /// A format-2 file of another key of the same length, or not a file of this tier.
        case miss
        /// Damaged: the caller counts it and removes it.
        case corrupt
        /// Not laid out as a format-2 file of a key this long (format 1, another key
        /// length, a size the header does not add up to, a short read): read it with
        /// `readHeader`, which tells these apart.
        case otherLayout
    }

    /// Reads a whole format-2 file of `key` with one `preadv`: the header and the key
    /// into a temporary buffer and the value straight into the array it is returned in,
    /// at the offsets the key's length gives. A disk hit's second `pread` (the value,
    /// after the header) is its own syscall otherwise, and the header's and key's copies
    /// two allocations.
    func readExpected(fd: Int32, path: String, status: POSIX.Status, key: CacheKey) throws(CacheError) -> ExpectedRead {
        let headerSize = DiskStorage.FileHeader.size
        let prefixSize = headerSize + key.count
        guard status.fileSize >= UInt64(prefixSize), status.fileSize - UInt64(prefixSize) <= UInt64(Int.max / 2) else {
            return .otherLayout
        }
        let valueSize = Int(status.fileSize) - prefixSize
        return try withUnsafeTemporaryAllocation(byteCount: prefixSize, alignment: 8) { prefix -> Result<ExpectedRead, CacheError> in
            var readError: Int32 = 0
            var complete = false
            let value = [UInt8](unsafeUninitializedCapacity: valueSize) { buffer, initialized in
                var vectors = (
                    iovec(iov_base: prefix.baseAddress, iov_len: prefixSize),
                    iovec(iov_base: UnsafeMutableRawPointer(buffer.baseAddress), iov_len: valueSize))
                let n = withUnsafeMutableBytes(of: &vectors) { raw -> Int in
                    let iov = raw.baseAddress!.assumingMemoryBound(to: iovec.self)
                    while true {
                        let n = preadv(fd, iov, valueSize == 0 ? 1 : 2, 0)
                        if n < 0 && errno == EINTR { continue }
                        if n < 0 { readError = errno }
                        return n
                    }
                }
                complete = n == prefixSize + valueSize
                initialized = complete ? valueSize : 0
            }
            if readError != 0 { return .failure(.cannotLoadDataFromDisk(path: path, errno: readError)) }
            // Shorter than fstat said: shrunk under us, which `readHeader` judges.
            guard complete else { return .success(.otherLayout) }
            let bytes = UnsafeRawBufferPointer(prefix)
            switch DiskStorage.FileHeader.decode(bytes) {
            case .foreign:
                return .success(.miss)
            case .corrupt:
                return .success(.corrupt)
            case .v1:
                return .success(.otherLayout)
            case .v2(let header):
                guard Int(header.keyLength) == key.count, header.fileSize == status.fileSize else {
                    return .success(.otherLayout)
                }
                let storedKey = UnsafeRawBufferPointer(rebasing: bytes[headerSize...])
                guard storedKey.elementsEqual(key.utf8) else { return .success(.miss) }
                let actual = value.withUnsafeBytes {
                    DiskStorage.FileHeader.computeChecksum(header: bytes, key: storedKey, value: $0)
                }
                guard actual == header.checksum else { return .success(.corrupt) }
                return .success(.loaded(OpenedFile(
                    flags: header.flags, version: header.version, ttlNanos: header.ttlNanos, valueOffset: prefixSize,
                    valueSize: valueSize, checksum: header.checksum, headerBytes: [], keyBytes: [], hasKey: true),
                    value))
            }
        }.get()
    }

    /// Counts a damaged file and removes it, if the name still points at the file that
    /// was read (`status`): a store may have renamed a good value over it meanwhile.
    func discardCorrupt(name: String, status: POSIX.Status) {
        corruptions.add(1, ordering: .relaxed)
        let path = path(of: name)
        var st = stat()
        guard lstat(path, &st) == 0, UInt64(st.st_dev) == status.device, UInt64(st.st_ino) == status.inode else { return }
        unlink(path)
        knownNames.eraseIfAbsent(name) { POSIX.exists(path) }
    }
}
