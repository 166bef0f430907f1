import Dispatch
import Foundation
import HalcyonCache
import HalcyonJSON
@testable import HalcyonRPC
import Testing

@Suite struct ParamsTests {
    func params(_ json: String, allowed: Set<String>? = nil) throws(RPCError) -> Params {
        let value = try! JSONValue.parse(json).get()
        return try Params(value, allowed: allowed ?? Set(value.keys))
    }

    func reason(_ body: () throws -> Void) -> String? {
        do { try body(); return nil } catch {
            guard let error = error as? RPCError else { return "not an RPCError" }
            return error.code == -32602 ? error.reason : "code \(error.code)"
        }
    }

    func param(_ body: () throws -> Void) -> RPCError.DataValue? {
        do { try body(); return nil } catch { return (error as? RPCError)?[data: "param"] }
    }

    @Test func unknownMembersAreRejected() throws {
        let value = try JSONValue.parse(#"{"key":"a","exipration":"never"}"#).get()
        do {
            _ = try Params(value, allowed: ["key", "expiration"])
            Issue.record("accepted a typo")
        } catch {
            #expect(error.reason == "unknownParam" && error[data: "param"] == .string("exipration"))
        }
        _ = try Params(nil, allowed: [])
        #expect(reason { _ = try Params(JSONValue.array([]), allowed: []) } == "positionalParams")
    }

    @Test func membersAreFoundWhateverTheLengthsOfOthers() throws {
        // Lookups skip names whose length no member has: members of equal length (`key`,
        // `ttl`), lengths 64 apart (which share a bit) and absent names must all answer right.
        let long = String(repeating: "n", count: 67)
        let p = try params(#"{"key":"a","ttl":5,"\#(long)":true,"value":null}"#,
                           allowed: ["key", "ttl", long, "value", "abc", "encoding"])
        #expect(try p.key() == "a")
        #expect(try p.int("ttl") == 5)
        #expect(try p.bool(long) == true)
        #expect(try p.int("abc") == nil)
        #expect(try p.string("encoding") == nil)
        #expect(p.value("value") == nil)
        #expect(reason { _ = try p.valueBytes("encoding", encoding: .utf8) } == "missingParam")
        // Params not checked against names look every name up.
        let unchecked = Params(unchecked: try JSONValue.parse(#"{"abc":1}"#).get())
        #expect(try unchecked.int("abc") == 1)
    }

    @Test func keyRules() throws {
        #expect(try params(#"{"key":"a/b\u0000c"}"#).key() == "a/b\u{0}c")
        #expect(try params(#"{"k":"x"}"#).key("k") == "x")
        #expect(reason { _ = try params(#"{}"#).key() } == "missingParam")
        #expect(reason { _ = try params(#"{"key":null}"#).key() } == "missingParam")
        #expect(reason { _ = try params(#"{"key":1}"#).key() } == "wrongType")
        #expect(reason { _ = try params(#"{"key":""}"#).key() } == "emptyKey")
        let exact = String(repeating: "é", count: 2048)
        #expect(try params(#"{"key":""# + exact + #""}"#).key() == CacheKey(exact))
        #expect(reason { _ = try params(#"{"key":""# + exact + #"x"}"#).key() } == "keyTooLong")
        #expect(param { _ = try params(#"{"key":""}"#).key() } == .string("key"))
    }

    @Test func scalarGetters() throws {
        let p = try params(#"{"s":"x","b":true,"d":1.5,"i":3,"n":null,"t":1700000000.5,"ri":3.0}"#)
        #expect(try p.string("s") == "x")
        #expect(try p.string("absent") == nil)
        #expect(try p.string("n") == nil)
        #expect(try p.bool("b", default: false) == true)
        #expect(try p.bool("absent", default: true) == true)
        #expect(try p.bool("n", default: true) == true)
        #expect(try p.double("d") == 1.5)
        #expect(try p.double("i") == 3)
        #expect(try p.int("i") == 3)
        #expect(try p.date("t") == Date(timeIntervalSince1970: 1_700_000_000.5))
        #expect(reason { _ = try p.string("b") } == "wrongType")
        #expect(reason { _ = try p.bool("s", default: false) } == "wrongType")
        #expect(reason { _ = try p.double("s") } == "wrongType")
        #expect(reason { _ = try p.int("ri") } == "wrongType")
        #expect(reason { _ = try p.date("s") } == "wrongType")
        #expect(reason { _ = try p.require("absent") } == "missingParam")
        do { _ = try p.int("d") } catch { #expect(error[data: "expected"] == .string("integer")) }
    }

    @Test func ids() throws {
        #expect(try params(#"{"id":"a"}"#).id() == .string("a"))
        #expect(try params(#"{"id":4}"#).id() == .number(4))
        #expect(try params(#"{"id":null}"#).id() == .null)
        #expect(reason { _ = try params(#"{}"#).id() } == "missingParam")
        #expect(reason { _ = try params(#"{"id":[]}"#).id() } == "wrongType")
    }

    @Test func expirations() throws {
        let p = try params(#"{"a":"never","b":"expired","c":{"seconds":1.5},"d":{"days":7},"e":{"date":1700000000}}"#)
        #expect(try p.expiration("a") == .never)
        #expect(try p.expiration("b") == .expired)
        #expect(try p.expiration("c") == .seconds(1.5))
        #expect(try p.expiration("d") == .days(7))
        #expect(try p.expiration("e") == .date(Date(timeIntervalSince1970: 1_700_000_000)))
        #expect(try p.expiration("absent") == nil)
        for bad in [#""forever""#, "5", #"{"seconds":0}"#, #"{"seconds":-1}"#, #"{"seconds":"5"}"#, #"{"days":1.5}"#,
                    #"{"days":0}"#, #"{"date":"x"}"#, #"{"hours":1}"#, #"{"seconds":1,"days":1}"#, "{}", "[]", "true"] {
            #expect(reason { _ = try params(#"{"x":"# + bad + "}").expiration("x") } == "invalidExpiration", "\(bad)")
        }
        #expect(param { _ = try params(#"{"memoryExpiration":1}"#).expiration("memoryExpiration") } == .string("memoryExpiration"))
    }

    @Test func extendingPolicies() throws {
        let p = try params(#"{"a":"none","b":"cacheTime","c":{"expirationTime":{"seconds":30}},"d":{"expirationTime":"never"}}"#)
        #expect(try p.extending("a") == ExpirationExtending.none)
        #expect(try p.extending("b") == .cacheTime)
        #expect(try p.extending("c") == .expirationTime(.seconds(30)))
        #expect(try p.extending("d") == .expirationTime(.never))
        #expect(try p.extending() == nil)
        for bad in [#""sometimes""#, #"{"expirationTime":"soon"}"#, #"{"expirationTime":{"days":-1}}"#, #"{"cacheTime":1}"#, "1"] {
            #expect(reason { _ = try params(#"{"x":"# + bad + "}").extending("x") } == "invalidExtending", "\(bad)")
        }
    }

    @Test func encodings() throws {
        #expect(try params(#"{"encoding":"utf8"}"#).encoding() == .utf8)
        #expect(try params(#"{"encoding":"base64"}"#).encoding() == .base64)
        #expect(try params(#"{"encoding":"json"}"#).encoding() == .json)
        #expect(try params(#"{}"#).encoding() == nil)
        #expect(reason { _ = try params(#"{"encoding":"hex"}"#).encoding() } == "invalidEncoding")
        #expect(reason { _ = try params(#"{"encoding":1}"#).encoding() } == "wrongType")
    }

    @Test func valueBytesDecodeInTheGivenEncoding() throws {
        #expect(try params(#"{"value":"hi"}"#).valueBytes(encoding: .utf8) == Array("hi".utf8))
        #expect(try params(#"{"value":"aGk="}"#).valueBytes(encoding: .base64) == Array("hi".utf8))
        #expect(try params(#"{"value":{"a": 1}}"#).valueBytes(encoding: .json) == Array(#"{"a":1}"#.utf8))
        #expect(reason { _ = try params(#"{}"#).valueBytes(encoding: .utf8) } == "missingParam")
        #expect(try params(#"{"value":null}"#).valueBytes(encoding: .json) == Array("null".utf8))
        #expect(reason { _ = try params(#"{"value":null}"#).valueBytes(encoding: .utf8) } == "invalidValue")
        #expect(reason { _ = try params(#"{"value":5}"#).valueBytes(encoding: .utf8) } == "invalidValue")
        #expect(reason { _ = try params(#"{"value":"aGk"}"#).valueBytes(encoding: .base64) } == "invalidBase64")
    }

    @Test func unixTimes() throws {
        var w = JSONWriter()
        w.beginArray()
        w.unixTime(nil); w.unixTime(.distantFuture); w.unixTime(Date(timeIntervalSince1970: 1_700_000_000))
        w.unixTime(Date(timeIntervalSince1970: 1.5)); w.unixTime(Date(timeIntervalSince1970: -2))
        w.endArray()
        #expect(String(decoding: w.bytes, as: UTF8.self) == "[null,null,1700000000,1.5,-2]")
    }

    @Test func requestOptions() throws {
        #expect(try params(#"{}"#).options() == RequestOptions())
        let o = try params(#"{"options":{"loadDiskFileSynchronously":true,"priority":"veryHigh"}}"#).options()
        #expect(o.loadDiskFileSynchronously == true && o.priority == .veryHigh)
        for (name, priority) in RequestOptions.priorityNames {
            #expect(try params(#"{"options":{"priority":""# + name + #""}}"#).options().priority == priority)
        }
        #expect(reason { _ = try params(#"{"options":{"priority":"urgent"}}"#).options() } == "invalidPriority")
        #expect(reason { _ = try params(#"{"options":{"priority":3}}"#).options() } == "invalidPriority")
        #expect(reason { _ = try params(#"{"options":{"priorty":"low"}}"#).options() } == "unknownParam")
        #expect(param { _ = try params(#"{"options":{"priorty":"low"}}"#).options() } == .string("options.priorty"))
        #expect(reason { _ = try params(#"{"options":{"loadDiskFileSynchronously":1}}"#).options() } == "wrongType")
        #expect(reason { _ = try params(#"{"options":[]}"#).options() } == "wrongType")
    }

    @Test func callbackQueuePolicies() throws {
        func policy(_ json: String) throws(RPCError) -> CallbackQueuePolicy? {
            let p = try params(#"{"callbackQueue":"# + json + "}")
            return try p.callbackQueuePolicy()
        }
        #expect(try policy(#""mainAsync""#) == .mainAsync)
        #expect(try policy(#""mainCurrentOrAsync""#) == .mainCurrentOrAsync)
        #expect(try policy(#""untouch""#) == .untouch)
        #expect(try policy(#"{"dispatch":{}}"#) == .dispatch(concurrent: false, qos: "default"))
        #expect(try policy(#"{"dispatch":{"concurrent":true,"qos":"utility"}}"#) == .dispatch(concurrent: true, qos: "utility"))
        #expect(try policy(#"{"operationQueue":{"maxConcurrentOperationCount":4}}"#) == .operationQueue(maxConcurrentOperationCount: 4))
        #expect(try policy(#"{"operationQueue":{}}"#) == .operationQueue(maxConcurrentOperationCount: 1))
        #expect(try policy("null") == nil)
        for bad in [#""main""#, "1", #"{"dispatch":{"qos":"fast"}}"#, #"{"dispatch":{"concurrent":"yes"}}"#,
                    #"{"dispatch":{"serial":true}}"#, #"{"dispatch":true}"#, #"{"operationQueue":{"maxConcurrentOperationCount":0}}"#,
                    #"{"operationQueue":{"maxConcurrentOperationCount":1.5}}"#, #"{"dispatch":{},"operationQueue":{}}"#, "{}"] {
            #expect(reason { _ = try policy(bad) } == "invalidCallbackQueue", "\(bad)")
        }
    }

    @Test func qosNamesMapToDispatchClasses() {
        #expect(CallbackQueuePolicy.dispatchQoS(named: "background") == .background)
        #expect(CallbackQueuePolicy.dispatchQoS(named: "utility") == .utility)
        #expect(CallbackQueuePolicy.dispatchQoS(named: "default") == .default)
        #expect(CallbackQueuePolicy.dispatchQoS(named: "userInitiated") == .userInitiated)
        #expect(CallbackQueuePolicy.dispatchQoS(named: "userInteractive") == .userInteractive)
    }

    @Test func callbackQueuePolicyWritesWhatItReads() throws {
        for p: CallbackQueuePolicy in [.mainAsync, .mainCurrentOrAsync, .untouch, .dispatch(concurrent: true, qos: "background"),
                                       .operationQueue(maxConcurrentOperationCount: 3)] {
            var w = JSONWriter()
            p.write(to: &w)
            #expect(try CallbackQueuePolicy(JSONValue.parse(w.bytes).get()) == p)
        }
    }
}
