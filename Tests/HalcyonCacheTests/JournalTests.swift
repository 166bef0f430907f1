// The write-ahead journal as a component: records round-trip, a torn tail is cut at
// every byte offset with every earlier record kept, damage before the tail is reported,
// a segment with another salt or sequence is rejected, checkpoints and segment deletion,
// the fsync policies, and ENOSPC as a typed error (on a small tmpfs where one can be mounted).

import Foundation
import Testing
@testable import HalcyonCache
#if canImport(Glibc)
import Glibc
#endif

/// A fresh journal folder per test, removed when released.
final class JournalTestFolder: @unchecked Sendable {  // immutable after init
    let path: String

    init(_ label: String = #function) {
        let safe = label.filter { $0.isLetter || $0.isNumber }
        path = FileManager.default.temporaryDirectory
            .appendingPathComponent("halcyon-journal-\(safe)-\(UUID().uuidString)", isDirectory: true).path
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func segmentPath(_ sequence: UInt64) -> String { path + "/" + Journal.SegmentName.name(sequence) }
}

@Suite("Journal")
struct JournalTests {
    /// Runs a command; true when it exited 0 (false when it could not start).
    static func run(_ tool: String, _ arguments: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    static func sampleRecords(_ count: Int) -> [Journal.Record] {
        (0..<count).map { i in
            switch i % 4 {
            case 0: return .set(key: "key-\(i)", flags: UInt32(i), version: UInt64(1000 + i), expiresAtNanos: i == 0 ? -1 : Int64(i) * 1_000_000_000,
                                ttlNanos: i == 0 ? -1 : 60_000_000_000, value: [UInt8](repeating: UInt8(i), count: i * 3))
            case 1: return .touch(key: "key-\(i - 1)", expiresAtNanos: 1_800_000_000_000_000_000)
            case 2: return .delete(key: "key-\(i)")
            default: return .clear
            }
        }
    }

    @Test func recordsRoundTripInOrderAcrossGroupsAndSegments() throws {
        let folder = JournalTestFolder()
        let records = Self.sampleRecords(40)
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never, segmentSizeLimit: 300))
        var ends: [Journal.Position] = []
        var index = 0
        for size in [1, 3, 16, 20] {
            ends.append(try writer.append(Array(records[index..<index + size])))
            index += size
        }
        #expect(writer.stats.groups == 4 && writer.stats.records == 40 && writer.stats.largestGroup == 20)
        #expect(writer.stats.segmentsCreated > 1)
        try writer.close()
        let recovered = try Journal.recover(directory: folder.path)
        #expect(recovered.records.map(\.record) == records)
        #expect(recovered.corruptions.isEmpty)
        #expect(recovered.tail == nil)
        #expect(recovered.records.last?.end == ends.last)
    }

    @Test func aFolderDeletedUnderTheWriterIsReportedAndMadeAgain() throws {
        let folder = JournalTestFolder()
        let records = Self.sampleRecords(8)
        // Small segments: the second case below needs a rotation into the missing folder.
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never, segmentSizeLimit: 200))
        try writer.append(Array(records[0..<2]))
        #expect(!writer.takeLoss())

        // Deleted between appends: the next append lands in the unlinked segment, and says so.
        try FileManager.default.removeItem(atPath: folder.path)
        try writer.append([records[2]])
        #expect(writer.takeLoss())
        #expect(!writer.takeLoss())  // reported once
        try writer.append([records[3]])
        #expect(!writer.takeLoss())
        #expect(try Journal.recover(directory: folder.path).records.map(\.record) == [records[3]])

        // Deleted while no append comes: `checkSegment` notices.
        try FileManager.default.removeItem(atPath: folder.path)
        writer.checkSegment()
        #expect(writer.takeLoss())

        // Deleted when a full segment must be followed by a new one: the folder is made
        // again, and the loss reported, the group itself kept.
        try writer.append(Array(records[4..<6]))
        #expect(!writer.takeLoss())
        var rotated = 0
        while writer.position.offset < 200, rotated < 100 {
            try writer.append([records[6]])
            rotated += 1
        }
        try FileManager.default.removeItem(atPath: folder.path)
        try writer.append([records[7]])
        #expect(writer.takeLoss())
        #expect(try Journal.recover(directory: folder.path).records.map(\.record) == [records[7]])
        #expect(writer.stats.segmentsLost == 3)
        try writer.close()
    }

    @Test func aTornTailIsCutAtEveryByteOffsetAndEveryEarlierRecordSurvives() throws {
        let folder = JournalTestFolder()
        let records = Self.sampleRecords(12)
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never))
        try writer.append(Array(records[0..<8]))
        let goodEnd = writer.position
        try writer.append(Array(records[8..<12]))  // the last records, to be torn
        let fullEnd = writer.position
        try writer.close()
        let path = folder.segmentPath(goodEnd.segment)
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(UInt64(original.count) == fullEnd.offset)

        // The ends of the last four records, to know which must survive each cut.
        let intact = try Journal.recover(directory: folder.path, cutTail: false)
        let lastEnds = intact.records.map(\.end.offset)
        for cut in Int(goodEnd.offset)..<original.count {
            try original.prefix(cut).write(to: URL(fileURLWithPath: path))
            let recovered = try Journal.recover(directory: folder.path)
            let survivors = lastEnds.filter { $0 <= UInt64(cut) }.count
            #expect(recovered.records.map(\.record) == Array(records.prefix(survivors)), "cut at \(cut)")
            #expect(recovered.corruptions.isEmpty, "cut at \(cut)")
            let cleanEnd = survivors == 0 ? 24 : lastEnds[survivors - 1]
            #expect(recovered.tail?.position.offset == (UInt64(cut) == cleanEnd ? nil : cleanEnd), "cut at \(cut)")
            // The tail was cut off the file: a second recovery finds a clean end.
            let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.uint64Value
            #expect(size == cleanEnd, "cut at \(cut)")
            #expect(try Journal.recover(directory: folder.path).tail == nil)
        }
    }

    @Test func aCorruptRecordMidSegmentIsReportedAndTheRestReplayed() throws {
        let folder = JournalTestFolder()
        let records = Self.sampleRecords(10)
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never))
        try writer.append(records)
        try writer.close()
        let intact = try Journal.recover(directory: folder.path, cutTail: false)
        let victim = intact.records[4]  // a `.set` with a value
        // Flip one byte inside its payload.
        let fd = open(folder.segmentPath(victim.start.segment), O_RDWR)
        #expect(fd >= 0)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, off_t(victim.start.offset + 12)) == 1)
        byte ^= 0x40
        #expect(pwrite(fd, &byte, 1, off_t(victim.start.offset + 12)) == 1)
        close(fd)

        let recovered = try Journal.recover(directory: folder.path)
        #expect(recovered.records.map(\.record) == records.enumerated().filter { $0.offset != 4 }.map(\.element))
        #expect(recovered.corruptions == [Journal.Corruption(
            position: victim.start, kind: .invalidRecord(bytes: Int(victim.end.offset - victim.start.offset)))])
        #expect(recovered.tail == nil)
    }

    @Test func aSegmentWithAnotherSaltOrSequenceIsRejected() throws {
        let folder = JournalTestFolder()
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .never))
        try writer.append(Self.sampleRecords(4))
        try writer.close()
        let path = folder.segmentPath(1)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let header = try #require(bytes.withUnsafeBytes { Journal.SegmentHeader.decode($0) })

        // Same records under a header with another salt: every checksum fails.
        let resalted = Journal.SegmentHeader(sequence: 1, salt: header.salt &+ 1).encode()
        bytes.replaceSubrange(0..<24, with: resalted)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let salted = try Journal.recover(directory: folder.path, cutTail: false)
        #expect(salted.records.isEmpty)
        #expect(salted.tail?.position == Journal.Position(segment: 1, offset: 24))

        // A segment whose header names another sequence (copied or left over) is skipped
        // and reported, and a later valid segment still replays.
        try FileManager.default.copyItem(atPath: path, toPath: folder.segmentPath(7))
        let next = try Journal.Writer(directory: folder.path, config: .init(fsync: .never))
        try next.append([.delete(key: "after")])
        try next.close()
        let stale = try Journal.recover(directory: folder.path, cutTail: false)
        #expect(stale.corruptions.contains(Journal.Corruption(position: .init(segment: 7, offset: 0),
                                                              kind: .staleSegment(headerSequence: 1))))
        #expect(stale.records.map(\.record) == [.delete(key: "after")])
    }

    @Test func checkpointSkipsMaterializedRecordsAndLetsSegmentsGo() throws {
        let folder = JournalTestFolder()
        let records = Self.sampleRecords(30)
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .always, segmentSizeLimit: 200))
        var ends: [Journal.Position] = []
        for record in records { ends.append(try writer.append([record])) }
        #expect(writer.stats.syncs >= 30)
        let checkpoint = ends[19]
        try Journal.Checkpoint.write(checkpoint, directory: folder.path)
        #expect(try Journal.Checkpoint.read(directory: folder.path) == checkpoint)
        let segmentsBefore = try Journal.SegmentName.list(in: folder.path)
        let deleted = try writer.deleteSegments(before: checkpoint)
        #expect(deleted == segmentsBefore.filter { $0 < checkpoint.segment }.count && deleted > 0)
        #expect(try Journal.SegmentName.list(in: folder.path).allSatisfy { $0 >= checkpoint.segment })
        try writer.close()

        let recovered = try Journal.recover(directory: folder.path)
        #expect(recovered.checkpoint == checkpoint)
        #expect(recovered.records.map(\.record) == Array(records[20...]))
        #expect(recovered.corruptions.isEmpty)

        // A damaged checkpoint means "replay everything that is left", never an error.
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: folder.path + "/checkpoint"))
        #expect(try Journal.Checkpoint.read(directory: folder.path) == nil)
        #expect(try Journal.recover(directory: folder.path).records.count >= 10)
    }

    @Test func everysecSyncsInTheBackgroundAndMeasuresTheLag() async throws {
        let folder = JournalTestFolder()
        let writer = try Journal.Writer(directory: folder.path, config: .init(fsync: .everysec, syncInterval: 0.05))
        try writer.append(Self.sampleRecords(3))
        let deadline = Date().addingTimeInterval(10)
        while writer.stats.syncs == 0 && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let stats = writer.stats
        #expect(stats.syncs >= 1)
        #expect(stats.maxSyncLagNanos > 0 && stats.syncFailures == 0)
        try writer.close()
        #expect(throws: CacheError.self) { try writer.append([.clear]) }
    }

    @Test func everysecSyncsFullSegmentsInTheBackgroundAndSyncWaitsForThem() throws {
        let folder = JournalTestFolder()
        // The timer never fires during the test: only rotations and `sync()` sync.
        let writer = try Journal.Writer(
            directory: folder.path, config: .init(fsync: .everysec, segmentSizeLimit: 200, syncInterval: 3600))
        let records = Self.sampleRecords(40)
        for record in records { try writer.append([record]) }
        let retired = writer.stats.segmentsCreated - 1
        #expect(retired >= 2)
        // Each full segment is synced by the background queue; `sync()` waits for those,
        // then syncs the current one.
        try writer.sync()
        let stats = writer.stats
        #expect(stats.syncs == retired + 1)
        #expect(stats.syncFailures == 0)
        try writer.close()
        #expect(try Journal.recover(directory: folder.path).records.map(\.record) == records)
    }

    @Test func noSpaceLeftIsATypedErrorWithErrnoAndTheJournalStaysClean() throws {
        let folder = JournalTestFolder()
        try FileManager.default.createDirectory(atPath: folder.path, withIntermediateDirectories: true)
        guard Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", folder.path]) else {
            print("JournalTests: skipping the ENOSPC test: cannot mount a tmpfs here")
            return
        }
        defer { _ = Self.run("/bin/umount", ["-l", folder.path]) }
        let writer = try Journal.Writer(directory: folder.path + "/j", config: .init(fsync: .never))
        try writer.append([.set(key: "small", flags: 0, version: 1, expiresAtNanos: -1, ttlNanos: -1, value: [1, 2, 3])])
        var caught: CacheError?
        do {
            try writer.append([.set(key: "big", flags: 0, version: 2, expiresAtNanos: -1, ttlNanos: -1,
                                    value: [UInt8](repeating: 7, count: 200_000))])
        } catch {
            caught = error
        }
        #expect(caught?.errno == ENOSPC)
        #expect(caught?.reason == "cannotWriteJournal")
        // The failed group was cut off; later appends that fit still go in after it.
        try writer.append([.delete(key: "after")])
        try writer.close()
        let recovered = try Journal.recover(directory: folder.path + "/j")
        #expect(recovered.records.map(\.record) == [
            .set(key: "small", flags: 0, version: 1, expiresAtNanos: -1, ttlNanos: -1, value: [1, 2, 3]),
            .delete(key: "after"),
        ])
        #expect(recovered.corruptions.isEmpty && recovered.tail == nil)
    }
}
