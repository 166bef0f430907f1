// A request prepared once and handed from path to path, against a real cache in a private
// folder: a memory miss carries its query to the handler, which goes to the disk without
// asking memory again; a declined direct write and a refusal reach `handle` as prepared.

import Dispatch
import Foundation
import HalcyonSupport
import HalcyonCache
import HalcyonJSON
@testable import HalcyonRPC
import HalcyonTestSupport
import Testing

@Suite(.serialized, .timeLimit(.minutes(1)))
struct PreparedCallTests {
    /// One cache and dispatcher in a folder of their own, and one connection's session.
    final class Fixture {
        let base = DispatcherFixture(prefix: "hc-prepared", debugMethods: false)
        let session = ConnectionSession(peerDescription: "test")
        var cache: HybridCache { base.cache }
        var dispatcher: Dispatcher { base.dispatcher }

        /// The request of one request line.
        func request(_ line: String) throws -> RPCRequest {
            guard case .single(.request(let request)) = RPCMessageParser.parse(line: line, maxBatch: 10) else {
                throw Failure("not one request: \(line)")
            }
            return request
        }

        /// What `handle` answers `call` with, waited for.
        func reply(_ call: PreparedCall) throws -> JSONValue {
            let done = DispatchSemaphore(value: 0)
            let reply = Locked<[UInt8]>([])
            dispatcher.handle(call) { answer in
                reply.withLock { $0 = answer.bytes }
                done.signal()
            }
            guard done.wait(timeout: .now() + 10) == .success else { throw Failure("no reply within 10 s") }
            return try JSONValue.parse(String(decoding: reply.withLock { $0 }, as: UTF8.self)).get()
        }

        /// Runs one request line to its reply.
        @discardableResult
        func run(_ line: String) throws -> JSONValue {
            try reply(dispatcher.prepare(try request(line), session: session))
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    @Test func aMemoryMissHandsItsQueryOnAndTheDiskAnswersWithOneMissCounted() throws {
        let fixture = Fixture()
        try fixture.run(#"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"d","value":"on disk"}}"#)
        try fixture.run(#"{"jsonrpc":"2.0","id":2,"method":"cache.remove","params":{"key":"d","fromDisk":false}}"#)
        let before = fixture.cache.stats()

        var handedOn = fixture.dispatcher.prepare(
            try fixture.request(#"{"jsonrpc":"2.0","id":3,"method":"cache.get","params":{"key":"d","encoding":"utf8"}}"#),
            session: fixture.session)
        var writer = JSONWriter()
        guard case .notAnswered = fixture.dispatcher.answerFromMemory(&handedOn, into: &writer) else {
            Issue.record("memory answered a key it does not hold")
            return
        }
        #expect(writer.bytes.isEmpty)
        guard case .accepted(let spec) = handedOn.verdict, case .getMissed(let query) = handedOn.memory else {
            Issue.record("the miss did not hand on its query: \(handedOn.verdict), \(handedOn.memory)")
            return
        }
        #expect(spec.name == "cache.get")
        #expect(query.key == "d")
        #expect(query.encoding == .utf8)
        #expect(fixture.cache.stats().memoryMisses == before.memoryMisses + 1)

        let reply = try fixture.reply(handedOn)
        #expect(reply["id"]?.int64 == 3)
        #expect(reply["result"]?["value"]?.string == "on disk")
        #expect(reply["result"]?["cacheType"]?.string == "disk")
        let after = fixture.cache.stats()
        #expect(after.memoryMisses == before.memoryMisses + 1, "memory asked again on the way to the disk")
        #expect(after.diskHits == before.diskHits + 1)
    }

    @Test func aHitIsAnsweredIntoTheWriterAndWhatMemoryCannotAnswerIsHandedOnAsPrepared() throws {
        let fixture = Fixture()
        try fixture.run(#"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"k","value":"hello"}}"#)
        var call = fixture.dispatcher.prepare(
            try fixture.request(#"{"jsonrpc":"2.0","id":2,"method":"cache.get","params":{"key":"k"}}"#),
            session: fixture.session)
        var writer = JSONWriter()
        guard case .answered(nil) = fixture.dispatcher.answerFromMemory(&call, into: &writer) else {
            Issue.record("a memory hit was not answered at once")
            return
        }
        let reply = try JSONValue.parse(String(decoding: writer.bytes, as: UTF8.self)).get()
        #expect(reply["result"]?["value"]?.string == "hello")
        #expect(reply["result"]?["cacheType"]?.string == "memory")

        // A method without a memory answer, and a notification, are handed on unchanged.
        for line in [#"{"jsonrpc":"2.0","id":3,"method":"cache.totalSize"}"#,
                     #"{"jsonrpc":"2.0","method":"cache.get","params":{"key":"k"}}"#] {
            var untouched = JSONWriter()
            var handedOn = fixture.dispatcher.prepare(try fixture.request(line), session: fixture.session)
            guard case .notAnswered = fixture.dispatcher.answerFromMemory(&handedOn, into: &untouched),
                  case .accepted = handedOn.verdict, case .nothing = handedOn.memory else {
                Issue.record("\(line): not handed on as prepared")
                continue
            }
            #expect(untouched.bytes.isEmpty)
        }
    }

    @Test func aRefusalIsPreparedOnceAndAnsweredByHandle() throws {
        let fixture = Fixture()
        let cases: [(line: String, reason: String?, code: Int64)] = [
            (#"{"jsonrpc":"2.0","id":1,"method":"cache.get","params":{"key":"k","nope":1}}"#, "unknownParam", -32602),
            (#"{"jsonrpc":"2.0","id":2,"method":"cache.nothing"}"#, nil, -32601),
            (#"{"jsonrpc":"2.0","id":3,"method":"debug.sleep","params":{"seconds":0}}"#, "debugMethodsDisabled", -32601),
            (#"{"jsonrpc":"2.0","id":4,"method":"$/cancelRequest","params":{"id":1}}"#, nil, -32601),
            (#"{"jsonrpc":"2.0","id":5,"method":"cache.get","params":{"key":"k","options":{"priority":"soon"}}}"#, "invalidPriority", -32602),
        ]
        for (line, reason, code) in cases {
            var call = fixture.dispatcher.prepare(try fixture.request(line), session: fixture.session)
            guard case .refused(let error) = call.verdict else {
                Issue.record("\(line): prepared for a handler")
                continue
            }
            #expect(Int64(error.code) == code, "\(line)")
            var writer = JSONWriter()
            guard case .notAnswered = fixture.dispatcher.answerFromMemory(&call, into: &writer) else {
                Issue.record("\(line): answered from memory")
                continue
            }
            #expect(fixture.dispatcher.directWrite(call) == nil)
            let reply = try fixture.reply(call)
            #expect(reply["error"]?["code"]?.int64 == code, "\(line)")
            if let reason { #expect(reply["error"]?["data"]?["reason"]?.string == reason, "\(line)") }
        }
    }

    @Test func aDeclinedDirectWriteIsHandledFromTheSamePreparedCall() throws {
        let fixture = Fixture()
        // `toDisk: false` is not for the journal: the direct path declines it.
        let call = fixture.dispatcher.prepare(
            try fixture.request(#"{"jsonrpc":"2.0","id":1,"method":"cache.set","params":{"key":"m","value":"mem","toDisk":false}}"#),
            session: fixture.session)
        #expect(fixture.dispatcher.directWrite(call) == nil)
        let stored = try fixture.reply(call)
        #expect(stored["result"]?["stored"]?.bool == true)
        let got = try fixture.run(#"{"jsonrpc":"2.0","id":2,"method":"cache.get","params":{"key":"m"}}"#)
        #expect(got["result"]?["value"]?.string == "mem")
        #expect(got["result"]?["cacheType"]?.string == "memory")

        fixture.base.waitUntilIdle()
        let direct = fixture.dispatcher.prepare(
            try fixture.request(#"{"jsonrpc":"2.0","id":3,"method":"cache.set","params":{"key":"j","value":"journal"}}"#),
            session: fixture.session)
        #expect(fixture.dispatcher.directWrite(direct)?.key == "j")
    }
}
