import Foundation
import HalcyonCache
import Testing
@testable import HalcyonServer

@Suite struct HumanUnitsTests {
    static let sizes: [(String, UInt64)] = [
        ("4096", 4096), ("0", 0), ("12B", 12), ("512KiB", 524_288), ("64MiB", 67_108_864),
        ("1GiB", 1_073_741_824), ("2TiB", 2_199_023_255_552), ("1KB", 1000), ("1MB", 1_000_000),
        ("1GB", 1_000_000_000), ("512K", 524_288), ("64M", 67_108_864), ("1G", 1_073_741_824),
        ("64mib", 67_108_864), ("1.5KiB", 1536), ("0.5GiB", 536_870_912), (" 8MiB ", 8_388_608),
        ("18446744073709551615", UInt64.max),
    ]

    static let durations: [(String, Double)] = [
        ("300s", 300), ("300", 300), ("1.5s", 1.5), ("500ms", 0.5), ("10m", 600), ("1h30m", 5400),
        ("7d", 604_800), ("2w", 1_209_600), ("1h0m30s", 3630), ("0", 0), ("0s", 0), ("10min", 600), ("2H", 7200),
    ]

    @Test(arguments: sizes)
    func parsesSizes(text: String, bytes: UInt64) throws {
        #expect(try HumanUnits.parseByteCount(text) == bytes)
    }

    @Test(arguments: ["", "MiB", "abc", "12XB", "-1", "1.2.3MiB", "64 MiB", "1e3", "99999999TiB", "18446744073709551616"])
    func rejectsBadSizes(text: String) {
        #expect(throws: HumanUnits.ParseError.self) { try HumanUnits.parseByteCount(text) }
    }

    @Test func intSizeRejectsOverflow() {
        #expect(throws: HumanUnits.ParseError.tooLarge("9223372036854775808")) {
            try HumanUnits.parseIntByteCount("9223372036854775808")
        }
    }

    @Test(arguments: durations)
    func parsesDurations(text: String, seconds: Double) throws {
        #expect(try HumanUnits.parseDuration(text) == seconds)
    }

    @Test(arguments: ["", "s", "10x", "-5s", "-5", "1h 30m", "h1", "nan", "inf", "1e3s", "5s3", "never"])
    func rejectsBadDurations(text: String) {
        #expect(throws: HumanUnits.ParseError.self) { try HumanUnits.parseDuration(text) }
    }

    @Test func parsesExpirations() throws {
        #expect(try HumanUnits.parseExpiration("never") == .never)
        #expect(try HumanUnits.parseExpiration("NEVER") == .never)
        #expect(try HumanUnits.parseExpiration("7d") == .days(7))
        #expect(try HumanUnits.parseExpiration("2w") == .days(14))
        #expect(try HumanUnits.parseExpiration("48h") == .days(2))
        #expect(try HumanUnits.parseExpiration("300s") == .seconds(300))
        #expect(try HumanUnits.parseExpiration("1.5") == .seconds(1.5))
        #expect(throws: HumanUnits.ParseError.notPositive("0s")) { try HumanUnits.parseExpiration("0s") }
    }

    @Test func formatsRoundTrip() throws {
        for bytes: UInt64 in [0, 1, 1000, 1024, 1536, 64 << 20, 1 << 30, 3 << 40, 123_456_789] {
            #expect(try HumanUnits.parseByteCount(HumanUnits.formatByteCount(bytes)) == bytes)
        }
        #expect(HumanUnits.formatByteCount(1 << 30) == "1GiB")
        #expect(HumanUnits.formatByteCount(256 << 20) == "256MiB")
        for seconds in [0, 0.25, 1.5, 59, 60, 600, 5400, 86_400, 90_061, 604_800] {
            #expect(try HumanUnits.parseDuration(HumanUnits.formatDuration(seconds)) == seconds)
        }
        #expect(HumanUnits.formatDuration(600) == "10m")
        #expect(HumanUnits.formatDuration(5400) == "1h30m")
        #expect(HumanUnits.formatDuration(0.5) == "500ms")
        #expect(HumanUnits.formatExpiration(.days(7)) == "7d")
        #expect(HumanUnits.formatExpiration(.seconds(300)) == "5m")
        #expect(HumanUnits.formatExpiration(.never) == "never")
    }

    @Test func errorsReadAsOneLine() {
        let errors: [HumanUnits.ParseError] = [.empty, .malformed("x"), .unknownUnit(text: "1XB", unit: "XB"), .tooLarge("9"), .notPositive("-1")]
        for error in errors {
            #expect(!error.description.isEmpty)
            #expect(!error.description.contains("\n"))
        }
    }
}
