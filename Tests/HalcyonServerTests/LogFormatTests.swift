import Foundation
import Logging
import Testing
@testable import HalcyonServer

@Suite struct LogFormatTests {
    @Test func jsonLineHasTheFixedFieldsThenMetadata() throws {
        let bytes = JSONLogHandler.line(
            time: Date(timeIntervalSince1970: 1_795_000_000.25), level: .debug, label: "halcyond",
            message: "connection \"opened\"", metadata: ["uid": "1000", "message": "not replaced", "pid": "7"]
        )
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String])
        #expect(object == [
            "time": "2026-11-18T11:06:40.250Z", "level": "debug", "label": "halcyond",
            "message": "connection \"opened\"", "uid": "1000", "pid": "7",
        ])
        #expect(!bytes.contains(UInt8(ascii: "\n")))
    }

    @Test func formatsParse() throws {
        #expect(try LogFormat(parsing: "json") == .json)
        #expect(try LogFormat(parsing: "text") == .text)
        #expect(throws: LogFormat.Invalid.self) { try LogFormat(parsing: "xml") }
    }
}
