// The replies both floor servers send: for each request line, the line halcyond would send
// for it (a 100-byte memory hit for a get, a stored reply for a set) with the request's id
// copied as it stands; and the line scans the servers share. No JSON is parsed.

/// The reply pieces around a request's id, and the one function that answers a line.
public enum Replies {
    @usableFromInline static let head = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
    @usableFromInline static let hit = Array(
        (#","result":{"found":true,"value":""# + String(repeating: "x", count: 100)
            + #"","encoding":"utf8","cacheType":"memory","expiresAt":1796640890,"version":1796036089876611}}"# + "\n")
            .utf8)
    @usableFromInline static let stored = Array(
        #","result":{"stored":true,"size":100,"expiresAt":1796640890,"version":1796036089876611}}"#.utf8 + [0x0A])
    @usableFromInline static let idMember = Array(#""id":"#.utf8)
    @usableFromInline static let setMethod = Array(#""cache.set""#.utf8)
    @usableFromInline static let null = Array("null".utf8)

    /// Hands the reply to one request line (without its newline) to `append`, piece by piece.
    @inlinable
    public static func answer(_ line: UnsafeRawBufferPointer, _ append: (UnsafeRawBufferPointer) -> Void) {
        head.withUnsafeBytes(append)
        if let at = LineScan.find(idMember, in: line) {
            var end = at + idMember.count
            while end < line.count, line[end] != UInt8(ascii: ","), line[end] != UInt8(ascii: "}") { end += 1 }
            append(UnsafeRawBufferPointer(rebasing: line[(at + idMember.count)..<end]))
        } else {
            null.withUnsafeBytes(append)
        }
        (LineScan.find(setMethod, in: line) == nil ? hit : stored).withUnsafeBytes(append)
    }
}

/// The lines of what a read brought, and byte searches within one line.
public enum LineScan {
    /// Calls `body` with each complete line of `bytes` (newline excluded), in order; returns
    /// where the unfinished rest begins.
    @inlinable
    public static func forEachLine(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) -> Int {
        var start = 0
        while let newline = bytes[start...].firstIndex(of: 0x0A) {
            body(UnsafeRawBufferPointer(rebasing: bytes[start..<newline]))
            start = newline + 1
        }
        return start
    }

    /// Where `needle` first starts in `line`, or nil.
    @inlinable
    public static func find(_ needle: [UInt8], in line: UnsafeRawBufferPointer) -> Int? {
        guard line.count >= needle.count else { return nil }
        var i = 0
        while i <= line.count - needle.count {
            if line[i] == needle[0], needle.indices.allSatisfy({ line[i + $0] == needle[$0] }) { return i }
            i += 1
        }
        return nil
    }
}
