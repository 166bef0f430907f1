import HalcyonCache
import HalcyonJSON
@testable import HalcyonRPC
import Testing

@Suite struct ValueEncodingTests {
    func decode(_ encoding: ValueEncoding, _ json: String) throws(RPCError) -> [UInt8] {
        try encoding.decode(try! JSONValue.parse(json).get())
    }

    /// Writes `bytes` stored with `stored` and read with `requested`; returns the JSON
    /// `value` and the encoding named, or the error.
    func read(_ bytes: [UInt8], stored: ValueEncoding?, requested: ValueEncoding?) -> Result<(JSONValue, ValueEncoding), RPCError> {
        var w = JSONWriter()
        w.beginArray()
        do {
            let used = try ValueEncoding.write(bytes: bytes, storedFlags: stored?.flags ?? 0, requested: requested, into: &w)
            w.endArray()
            return .success((try! JSONValue.parse(w.bytes).get()[0]!, used))
        } catch {
            return .failure(error)
        }
    }

    @Test func flagsAreStable() {
        #expect(ValueEncoding.utf8.flags == 1)
        #expect(ValueEncoding.base64.flags == 2)
        #expect(ValueEncoding.json.flags == 3)
        #expect(ValueEncoding(storedFlags: 0) == .base64)
        #expect(ValueEncoding(storedFlags: 99) == .base64)
        for e in ValueEncoding.allCases { #expect(ValueEncoding(storedFlags: e.flags) == e) }
    }

    @Test func decodeEachEncoding() throws {
        #expect(try decode(.utf8, #""h\u0000é""#) == [0x68, 0] + Array("é".utf8))
        #expect(try decode(.base64, #""AP8=""#) == [0, 0xFF])
        #expect(try decode(.base64, #""""#) == [])
        #expect(try decode(.json, #"{"b" : [1, 2.5, null]}"#) == Array(#"{"b":[1,2.5,null]}"#.utf8))
        #expect(try decode(.json, #""text""#) == Array(#""text""#.utf8))
        do { _ = try decode(.utf8, "1"); Issue.record("accepted") } catch { #expect(error.reason == "invalidValue") }
        do { _ = try decode(.base64, "{}"); Issue.record("accepted") } catch { #expect(error.reason == "invalidValue") }
        for bad in [#""AP8""#, #""A P8=""#, #""AP9=""#, #""AP8=\n""#, #""-_8=""#] {
            do { _ = try decode(.base64, bad); Issue.record("accepted \(bad)") } catch {
                #expect(error.reason == "invalidBase64" && error.code == -32602)
            }
        }
    }

    @Test func readWithoutEncodingAnswersInTheStoredOne() throws {
        let text = Array("héllo".utf8)
        let u = try read(text, stored: .utf8, requested: nil).get()
        #expect(u.0.string == "héllo" && u.1 == .utf8)
        let b = try read([0xFF, 0], stored: .base64, requested: nil).get()
        #expect(b.0.string == "/wA=" && b.1 == .base64)
        let j = try read(Array(#"{"a":[1,true]}"#.utf8), stored: .json, requested: nil).get()
        #expect(j.0 == (try JSONValue.parse(#"{"a":[1,true]}"#).get()) && j.1 == .json)
        let legacy = try read([1, 2, 3], stored: nil, requested: nil).get()
        #expect(legacy.1 == .base64 && legacy.0.string == "AQID")
    }

    @Test func conversionTable() throws {
        // utf8 stored
        #expect(try read(Array("x\n".utf8), stored: .utf8, requested: .base64).get().0.string == "eAo=")
        #expect(try read(Array(" [1, 2]\n".utf8), stored: .utf8, requested: .json).get().0.compactText == "[1,2]")
        #expect(read(Array("not json".utf8), stored: .utf8, requested: .json).failureCode == -32004)
        // base64 stored
        #expect(try read(Array("plain".utf8), stored: .base64, requested: .utf8).get().0.string == "plain")
        #expect(read([0xC3, 0x28], stored: .base64, requested: .utf8).failureCode == -32004)
        #expect(try read(Array("{\"k\":1}".utf8), stored: .base64, requested: .json).get().0["k"]?.int64 == 1)
        #expect(read([0xFF], stored: .base64, requested: .json).failureCode == -32004)
        #expect(read([], stored: .base64, requested: .json).failureCode == -32004)
        #expect(try read([], stored: .base64, requested: .utf8).get().0.string == "")
        // json stored
        #expect(try read(Array(#"{"a":"b"}"#.utf8), stored: .json, requested: .utf8).get().0.string == #"{"a":"b"}"#)
        #expect(try read(Array("[]".utf8), stored: .json, requested: .base64).get().0.string == "W10=")
        // A damaged json entry with raw whitespace still yields one compact line.
        let damaged = try read(Array("[1,\n2]".utf8), stored: .json, requested: .json).get()
        #expect(damaged.0.compactText == "[1,2]")
        // Any bytes can be shown as base64.
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<64).map { _ in UInt8.random(in: 0...255, using: &rng) }
        #expect(StrictBase64.decode(try read(bytes, stored: .utf8, requested: .base64).get().0.string ?? "") == bytes)
    }

    @Test func cannotEncodeNamesBothEncodings() throws {
        guard case .failure(let e) = read([0xFF], stored: .base64, requested: .utf8) else { Issue.record("wrote"); return }
        #expect(e.reason == "cannotEncode")
        #expect(e[data: "encoding"] == .string("utf8"))
        #expect(e[data: "storedEncoding"] == .string("base64"))
    }

    @Test func storeThenReadRoundTripsEveryEncoding() throws {
        for (encoding, json) in [(ValueEncoding.utf8, #""tëxt\u2028""#), (.base64, #""AAEC""#), (.json, #"{"n":[1,2,{"x":null}]}"#)] {
            let sent = try JSONValue.parse(json).get()
            let stored = try encoding.decode(sent)
            let (back, used) = try read(stored, stored: encoding, requested: nil).get()
            #expect(back == sent && used == encoding)
        }
    }
}

extension Result where Failure == RPCError {
    var failureCode: Int32? {
        if case .failure(let e) = self { return e.code }
        return nil
    }
}
