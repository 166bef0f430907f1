// The CLI's durations and instants: the grammar it shares with the daemon, the messages
// a bad one gets, and the short human forms `describe` prints.

import Testing
@testable import halcyon

@Suite struct DurationsTests {
    @Test func secondsFollowTheSharedGrammar() throws {
        #expect(try Durations.seconds("90") == 90)
        #expect(try Durations.seconds("1.5") == 1.5)
        #expect(try Durations.seconds("500ms") == 0.5)
        #expect(try Durations.seconds("30s") == 30)
        #expect(try Durations.seconds("10m") == 600)
        #expect(try Durations.seconds("2h") == 7200)
        #expect(try Durations.seconds("7d") == 604_800)
        #expect(try Durations.seconds("1w") == 604_800)
        #expect(try Durations.seconds("1h30m") == 5400)
        #expect(try Durations.seconds("2m30.5s") == 150.5)
    }

    @Test func badDurationsNameTheProblem() {
        func message(_ text: String) -> String? {
            do {
                _ = try Durations.seconds(text)
                return nil
            } catch {
                return error.description
            }
        }
        #expect(message("") == "empty duration")
        #expect(message("0") == "duration '0' must be greater than zero")
        #expect(message("0s") == "duration '0s' must be greater than zero")
        #expect(message("5y") == "invalid duration unit in '5y' (use ms, s, m, min, h, d or w)")
        #expect(message("abc") == "invalid duration 'abc' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)")
        #expect(message("99999999999w") == "invalid duration '99999999999w' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)")
        #expect(message("1h-") == "invalid duration '1h-' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)")
        #expect(message("-5") == "invalid duration '-5' (use e.g. 500ms, 30s, 10m, 2h, 7d, 1h30m)")
    }

    @Test func zeroIsAllowedOnlyWhereAsked() throws {
        #expect(try Durations.secondsOrZero("0") == 0)
        #expect(try Durations.secondsOrZero("0ms") == 0)
        #expect(try Durations.secondsOrZero("250ms") == 0.25)
        #expect(throws: Durations.ParseError.self) { try Durations.secondsOrZero("") }
        #expect(throws: Durations.ParseError.self) { try Durations.seconds("0") }
    }

    @Test func instantsAreUnixSecondsOrRFC3339() throws {
        #expect(try Durations.unixTime("1763865660") == 1_763_865_660)
        #expect(try Durations.unixTime("1763865660.5") == 1_763_865_660.5)
        #expect(try Durations.unixTime("2026-11-23T10:00:00Z") == 1_795_428_000)
        #expect(try Durations.unixTime("2026-11-23t10:00:00z") == 1_795_428_000)
        #expect(try Durations.unixTime("2026-11-23 10:00:00Z") == 1_795_428_000)
        #expect(try Durations.unixTime("2026-11-23T11:00:00.5+01:00") == 1_795_428_000.5)
        #expect(try Durations.unixTime("2026-11-23T08:30:00-01:30") == 1_795_428_000)
        // Second 60, as RFC 3339 allows it, is the first second of the next minute.
        #expect(try Durations.unixTime("2026-11-23T10:00:60Z") == 1_795_428_060)
    }

    @Test func badInstantsAreRefused() {
        for text in [
            "", "now", "inf", "nan", "2026-11-23T10:00:00", "2026-11-23", "2026-02-31T00:00:00Z",
            "2026-13-01T00:00:00Z", "2026-11-23T24:00:00Z", "2026-11-23T10:00:00.Z", "2026-11-23T10:00:00+0100",
            "2026-11-23T10:00:00Zjunk", "26-11-23T10:00:00Z",
        ] {
            #expect(throws: Durations.ParseError.self, "\(text)") { try Durations.unixTime(text) }
        }
        do {
            _ = try Durations.unixTime("soon")
            Issue.record("'soon' was taken as a time")
        } catch {
            #expect(error.description == "invalid time 'soon' (use Unix seconds or ISO 8601 such as 2026-11-23T10:00:00Z)")
        }
    }

    @Test func describeIsShortAndKeepsSubSecondSpans() {
        #expect(Durations.describe(0) == "0s")
        #expect(Durations.describe(-3) == "0s")
        #expect(Durations.describe(0.25) == "0.3s")
        #expect(Durations.describe(0.25, rounding: .down) == "0.2s")
        #expect(Durations.describe(9.96) == "10s")
        #expect(Durations.describe(9.96, rounding: .down) == "9.9s")
        #expect(Durations.describe(45) == "45s")
        #expect(Durations.describe(599) == "9m 59s")
        #expect(Durations.describe(600) == "10m")
        #expect(Durations.describe(600.99, rounding: .down) == "10m")
        #expect(Durations.describe(600.99) == "10m 1s")
        #expect(Durations.describe(3600) == "1h")
        #expect(Durations.describe(7500) == "2h 5m")
        #expect(Durations.describe(86_400) == "1d")
        #expect(Durations.describe(273_600) == "3d 4h")
    }

    @Test func instantsPrintInUTC() {
        #expect(Durations.formatUTC(0) == "1970-01-01 00:00:00 UTC")
        #expect(Durations.formatUTC(1_795_428_000) == "2026-11-23 10:00:00 UTC")
        #expect(Durations.formatUTC(1_795_428_000.999) == "2026-11-23 10:00:00 UTC")
        #expect(Durations.formatUTC(1_709_251_199) == "2024-02-29 23:59:59 UTC")
    }
}
