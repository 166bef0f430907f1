// Mapped journal segments (`Journal+Writer.swift`, "Mapped segments"): a segment's space is
// reserved and mapped, groups are copied into it, and what a crash leaves there reads
// back as the records before it. A crash is a copy of the live segment's file: its pages
// are what the kernel keeps when the process dies. A copy killed mid-group is that copy
// with the frame headers the copy had not stored yet put back to zero.

import Foundation
import Testing
@testable import HalcyonCache

@Suite("Journal mapped segments")
struct JournalMappedSegmentTests {
    static let segmentSize: UInt64 = 1 << 20

    /// The size of the file at `path`.
    static func size(_ path: String) -> UInt64? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.uint64Value
    }

    /// A writer of 1 MiB segments that leaves syncing to the kernel.
    static func writer(in folder: JournalTestFolder) throws -> Journal.Writer {
        try Journal.Writer(directory: folder.path, config: .init(fsync: .never, segmentSizeLimit: segmentSize))
    }

    /// The files of `folder` as the kernel holds them now, copied to a new folder.
    static func crashCopy(of folder: JournalTestFolder) throws -> JournalTestFolder {
        let copy = JournalTestFolder("crash")
        try FileManager.default.createDirectory(atPath: copy.path, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/" + name))
            try bytes.write(to: URL(fileURLWithPath: copy.path + "/" + name))
        }
        return copy
    }

    @Test func groupsGoIntoTheReservedSpaceAndACrashLeavesACleanEnd() throws {
        let folder = JournalTestFolder()
        let records = JournalTests.sampleRecords(40)
        let writer = try Self.writer(in: folder)
        for start in stride(from: 0, to: 40, by: 8) { try writer.append(Array(records[start..<start + 8])) }
        let end = writer.position
        #expect(writer.stats.mappedSegments == 1)
        #expect(writer.stats.mappedGroups == 5)
        // The whole reservation is the file's, zeros after the records.
        #expect(Self.size(folder.segmentPath(end.segment)) == Self.segmentSize)

        let crashed = try Self.crashCopy(of: folder)
        let recovered = try Journal.recover(directory: crashed.path)
        #expect(recovered.records.map(\.record) == records)
        #expect(recovered.corruptions.isEmpty)
        #expect(recovered.tail == nil)
        // The zeros are cut off with the recovery, as a torn tail is.
        #expect(Self.size(crashed.segmentPath(end.segment)) == end.offset)

        // A closed segment keeps its records only.
        try writer.close()
        #expect(Self.size(folder.segmentPath(end.segment)) == end.offset)
        let reread = try Journal.recover(directory: folder.path)
        #expect(reread.records.map(\.record) == records && reread.tail == nil && reread.corruptions.isEmpty)
    }

    @Test func aGroupKilledMidCopyEndsTheSegmentAtItsFirstMissingHeader() throws {
        let folder = JournalTestFolder()
        let records = JournalTests.sampleRecords(12)
        let writer = try Self.writer(in: folder)
        try writer.append(Array(records[0..<8]))
        let groupStart = writer.position
        try writer.append(Array(records[8..<12]))  // the group the crash interrupts
        let crashed = try Self.crashCopy(of: folder)
        try writer.close()
        let path = crashed.segmentPath(groupStart.segment)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let starts = try Journal.recover(directory: crashed.path, cutTail: false).records.suffix(4).map { Int($0.start.offset) }

        // Every payload stored, the headers of some records not (any of them: the copy
        // orders payloads before headers, not one header before another). Recovery keeps
        // the records before the first missing header and nothing after it.
        let header = Journal.RecordCodec.frameHeaderSize
        for missing in 1..<(1 << 4) {
            var bytes = whole
            for (i, start) in starts.enumerated() where missing & (1 << i) != 0 {
                bytes.replaceSubrange(start..<start + header, with: [UInt8](repeating: 0, count: header))
            }
            try bytes.write(to: URL(fileURLWithPath: path))
            let firstMissing = (0..<4).first { missing & (1 << $0) != 0 }!
            let recovered = try Journal.recover(directory: crashed.path, cutTail: false)
            #expect(recovered.records.map(\.record) == Array(records.prefix(8 + firstMissing)), "missing \(missing)")
            #expect(recovered.corruptions.isEmpty, "missing \(missing)")
            #expect(recovered.tail?.position.offset == UInt64(starts[firstMissing]), "missing \(missing)")
        }
    }

    @Test func aGroupThatDoesNotFitIsWrittenAfterTheRecordsAndTheNextSegmentIsMappedAgain() throws {
        let folder = JournalTestFolder()
        let small = JournalTests.sampleRecords(4)
        let large = Journal.Record.set(
            key: "large", flags: 0, version: 9, expiresAtNanos: -1, ttlNanos: -1, value: [UInt8](repeating: 5, count: 100_000))
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never, segmentSizeLimit: 1 << 16))
        try writer.append(Array(small[0..<2]))
        let first = writer.position
        try writer.append([large])  // past the 64 KiB mapping: written
        #expect(writer.position.segment == first.segment)
        #expect(Self.size(folder.segmentPath(first.segment)) == writer.position.offset)
        try writer.append(Array(small[2..<4]))  // a full segment: the next one, mapped
        #expect(writer.position.segment == first.segment + 1)
        #expect(writer.stats.mappedSegments == 2)
        #expect(writer.stats.mappedGroups == 2)
        try writer.close()
        let recovered = try Journal.recover(directory: folder.path)
        #expect(recovered.records.map(\.record) == Array(small[0..<2]) + [large] + Array(small[2..<4]))
        #expect(recovered.corruptions.isEmpty && recovered.tail == nil)
    }

    @Test func anOlderSegmentEndingInReservedZerosIsNoDamage() throws {
        let folder = JournalTestFolder()
        let records = JournalTests.sampleRecords(6)
        let writer = try Self.writer(in: folder)
        try writer.append(Array(records[0..<3]))
        let older = writer.position
        // As a crash leaves a rotation whose cut had not run yet: the older segment still
        // holds its reserved zeros, and a newer one follows.
        let crashed = try Self.crashCopy(of: folder)
        try writer.rotate()
        try writer.append(Array(records[3..<6]))
        try writer.close()
        let newer = folder.segmentPath(older.segment + 1)
        try FileManager.default.copyItem(atPath: newer, toPath: crashed.segmentPath(older.segment + 1))
        #expect(Self.size(crashed.segmentPath(older.segment)) == Self.segmentSize)

        let recovered = try Journal.recover(directory: crashed.path)
        #expect(recovered.records.map(\.record) == records)
        #expect(recovered.corruptions.isEmpty && recovered.tail == nil)
        #expect(Self.size(crashed.segmentPath(older.segment)) == older.offset)
    }
}
