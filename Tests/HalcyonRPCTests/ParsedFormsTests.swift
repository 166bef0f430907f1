// A request line means the same whichever parser read it: the scanner's flat document and
// jansson's tree give the same envelope, the same params and the same refusals.

import HalcyonCache
import HalcyonJSON
@testable import HalcyonRPC
import Testing

@Suite struct ParsedFormsTests {
    /// The request `line` parses to, by the scanner (which must take it) and by jansson.
    func bothForms(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (flat: RPCRequest, tree: RPCRequest) {
        let bytes = Array(line.utf8)
        guard case .parsed(let document) = bytes.withUnsafeBytes({ JSONScanner.scan($0) }) else {
            Issue.record("the scanner deferred \(line)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        guard case .request(let flat) = withExtendedLifetime(document, { RPCMessageParser.element(document.root, in: document) }),
              case .request(let tree) = RPCMessageParser.element(try JSONValue.parse(bytes).get()) else {
            Issue.record("not a request: \(line)", sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return (flat, tree)
    }

    /// What one getter gives, or the reason and param of its refusal, as text.
    func outcome<T>(_ body: () throws -> T) -> String {
        do { return "\(try body())" } catch {
            guard let error = error as? RPCError else { return "not an RPCError" }
            return "\(error.reason) \(error[data: "param"].map { "\($0)" } ?? "")"
        }
    }

    /// Every getter the methods use, as a reading of one member.
    static let getters: [@Sendable (Params, String) throws -> Any?] = [
        { try $0.key($1) }, { try $0.string($1) }, { try $0.int($1) }, { try $0.double($1) },
        { try $0.bool($1) }, { try $0.date($1) }, { try $0.expiration($1) }, { try $0.extending($1) },
        { try $0.options($1) }, { try $0.encoding($1) }, { try $0.callbackQueuePolicy($1) }, { try $0.id($1) },
        { $0.value($1).map { "\($0.kind)" } },
    ] + ValueEncoding.allCases.map { encoding in { @Sendable in try $0.valueBytes($1, encoding: encoding) } }

    /// Every getter applied to every member name the lines use, and to one they do not.
    func readings(_ params: Params) -> [String] {
        let names = ["key", "value", "ttl", "n", "flag", "encoding", "options", "expiration",
                     "extendingExpiration", "date", "callbackQueue", "absent"]
        return names.flatMap { name in Self.getters.map { get in outcome { try get(params, name) } } }
    }

    @Test func theScannersDocumentReadsAsJanssonsTree() throws {
        let lines = [
            #"{"jsonrpc":"2.0","id":1,"method":"server.ping"}"#,
            #"{"jsonrpc":"2.0","id":"a","method":"cache.get","params":{"key":"user:42"}}"#,
            #"{"jsonrpc":"2.0","id":null,"method":"cache.set","params":{"key":"k","value":"hello","expiration":{"seconds":5},"encoding":"utf8"}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"cache.set","params":{"key":"k","value":{"a":1,"b":true,"c":null,"d":"e"},"encoding":"json"}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"cache.set","params":{"key":"k","value":"aGVsbG8=","encoding":"base64","expiration":"never"}}"#,
            #"{"jsonrpc":"2.0","id":4,"method":"cache.get","params":{"key":"k","extendingExpiration":"none","options":{"priority":"high","loadDiskFileSynchronously":true}}}"#,
            #"{"jsonrpc":"2.0","id":5,"method":"cache.get","params":{"key":"k","extendingExpiration":"cacheTime","callbackQueue":"untouch"}}"#,
            #"{"jsonrpc":"2.0","id":6,"method":"cache.incr","params":{"key":"n","n":-12,"flag":false,"date":1700000000}}"#,
            // Wrong types and bad forms: both must refuse alike.
            #"{"jsonrpc":"2.0","id":7,"method":"cache.get","params":{"key":5,"ttl":"x","n":"1","flag":1,"date":-1}}"#,
            #"{"jsonrpc":"2.0","id":8,"method":"cache.get","params":{"key":"","expiration":{"seconds":0},"options":{"priorty":"high"}}}"#,
            #"{"jsonrpc":"2.0","id":9,"method":"cache.get","params":{"key":null,"value":null,"encoding":"utf16","extendingExpiration":{"expirationTime":"soon","x":1}}}"#,
            #"{"jsonrpc":"2.0","id":10,"method":"cache.get","params":{"expiration":{"seconds":1,"days":1},"callbackQueue":{"dispatch":"x"},"options":7}}"#,
            #"{"jsonrpc":"2.0","id":11,"method":"cache.get","params":{"key":"café € 😀","value":"not base64!","n":999999999999999999}}"#,
            #"{"jsonrpc":"2.0","id":12,"method":"cache.get","params":{}}"#,
        ]
        for line in lines {
            let (flat, tree) = try bothForms(line)
            #expect(flat.id == tree.id, "\(line)")
            #expect(flat.method == tree.method, "\(line)")
            #expect(flat.params == tree.params, "\(line)")
            let names = ParamNames(tree.params?.keys ?? [])
            let flatParams = try Params(node: flat.paramsNode, allowed: names)
            let treeParams = try Params(node: tree.paramsNode, allowed: names)
            #expect(readings(flatParams) == readings(treeParams), "\(line)")
            // A member the method does not take is refused by name in both.
            let fewer = ParamNames(Array(names.names.dropLast()))
            if !names.names.isEmpty {
                #expect(outcome { try Params(node: flat.paramsNode, allowed: fewer) }.hasPrefix("unknownParam")
                        == outcome { try Params(node: tree.paramsNode, allowed: fewer) }.hasPrefix("unknownParam"))
            }
        }
    }

    @Test func envelopeRefusalsAreTheSame() throws {
        let lines = [
            #"{"jsonrpc":"1.0","id":1,"method":"server.ping"}"#,
            #"{"jsonrpc":"2.0","id":true,"method":"server.ping"}"#,
            #"{"jsonrpc":"2.0","id":1,"method":5}"#,
            #"{"jsonrpc":"2.0","id":1}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"server.ping","param":{}}"#,
            #"{"jsonrpc":"2.0","id":1,"method":"server.ping","params":"x"}"#,
            #"{"jsonrpc":"2.0","method":"server.ping","params":{"a":{"b":1}}}"#,
        ]
        for line in lines {
            let bytes = Array(line.utf8)
            guard case .single(let flat) = RPCMessageParser.parse(line: bytes, maxBatch: 10) else {
                Issue.record("not one element: \(line)")
                continue
            }
            let tree = RPCMessageParser.element(try JSONValue.parse(bytes).get())
            #expect(describe(flat) == describe(tree), "\(line)")
        }
    }

    func describe(_ element: RPCElement) -> String {
        switch element {
        case .request(let request): return "request \(request.id.map { "\($0)" } ?? "nil") \(request.method) \(request.params.map { "\($0)" } ?? "nil")"
        case .invalid(let id, let error): return "invalid \(id.map { "\($0)" } ?? "nil") \(error.code) \(error.reason) \(error.message)"
        }
    }
}
