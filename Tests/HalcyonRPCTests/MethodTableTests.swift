import HalcyonJSON
@testable import HalcyonRPC
import Testing

@Suite struct MethodTableTests {
    @Test func oneLinePerMethodWithConsistentFlags() {
        let names = Dispatcher.methodTable.map(\.name)
        #expect(Set(names).count == names.count, "a method appears twice")
        for spec in Dispatcher.methodTable {
            #expect(!(spec.flags.contains(.read) && spec.flags.contains(.write)), "\(spec.name): read and write")
            #expect(!(spec.flags.contains(.write) && spec.flags.contains(.fast)), "\(spec.name): a write waits for the ioQueue")
            switch spec.handler {
            case .call: #expect(!spec.flags.contains(.transport), "\(spec.name)")
            case .transport: #expect(spec.flags.contains(.transport), "\(spec.name)")
            }
            #expect(spec.takesOptions == spec.params.contains("options"))
        }
        let transport = Dispatcher.methodTable.filter { $0.flags.contains(.transport) }.map(\.name)
        #expect(transport == ["$/cancelRequest"])
        let debug = Dispatcher.methodTable.filter { $0.flags.contains(.debug) }.map(\.name)
        #expect(debug == ["debug.sleep"])
    }

    @Test func eachSpecHoldsItsRoutesOnlyWhereItsFlagsAllowThem() {
        for (index, spec) in Dispatcher.methodTable.enumerated() {
            #expect(spec.index == index, "\(spec.name): numbered \(spec.index), at \(index)")
            #expect(Dispatcher.methodNames[index] == spec.name)
            if spec.memoryAnswer != nil {
                #expect(spec.flags.contains(.fast) && !spec.flags.contains(.debug), "\(spec.name): memory answer")
                guard case .call = spec.handler else {
                    Issue.record("\(spec.name): a memory answer beside a transport handler")
                    continue
                }
            }
            if spec.directWrite != nil {
                #expect(spec.flags.contains(.write), "\(spec.name): direct write")
            }
        }
        let memory = Dispatcher.methodTable.filter { $0.memoryAnswer != nil }.map(\.name)
        #expect(memory == ["cache.get", "cache.isCached", "cache.describe", "server.ping"])
        let direct = Dispatcher.methodTable.filter { $0.directWrite != nil }.map(\.name)
        #expect(direct == ["cache.set", "cache.add", "cache.cas", "cache.incr"])
    }

    @Test func aNameFoundByItsBytesIsTheLineFoundByName() {
        func named(_ name: String) -> MethodSpec? { Array(name.utf8).withUnsafeBytes { MethodSpec.named($0) } }
        for spec in Dispatcher.methodTable {
            #expect(named(spec.name) === MethodSpec.byName[spec.name], "\(spec.name)")
            #expect(named(spec.name)?.name == spec.name)
            // Near misses of every line: a byte short, a byte more, a byte changed, another case.
            #expect(named(String(spec.name.dropLast())) == nil || Dispatcher.methodTable.contains { $0.name == String(spec.name.dropLast()) })
            #expect(named(spec.name + "x") == nil)
            #expect(named(spec.name.uppercased()) == nil)
            #expect(named(String(spec.name.dropLast()) + "#") == nil)
        }
        #expect(named("") == nil)
        #expect(named(String(repeating: "m", count: 300)) == nil)
    }

    @Test func cancelRequestDecodesItsTarget() throws {
        guard let spec = Dispatcher.methodTable.first(where: { $0.name == "$/cancelRequest" }),
              case .transport(let decode) = spec.handler else {
            Issue.record("no transport line for $/cancelRequest")
            return
        }
        func action(_ params: String) throws(RPCError) -> TransportAction {
            let value = try! JSONValue.parse(params).get()
            return try decode(try Params(node: JSONNode(value), allowed: spec.params))
        }
        #expect(try action(#"{"id":7}"#) == .cancel(.number(7)))
        #expect(try action(#"{"id":"a"}"#) == .cancel(.string("a")))
        #expect(try action(#"{"id":null}"#) == .cancel(.null))
        do {
            _ = try action(#"{"id":1,"extra":2}"#)
            Issue.record("accepted an unknown param")
        } catch {
            #expect(error.reason == "unknownParam")
        }
        do {
            _ = try action(#"{}"#)
            Issue.record("accepted a missing id")
        } catch {
            #expect(error.reason == "missingParam")
        }
    }

    @Test func paramNamesCompareBytesExactly() {
        let names: ParamNames = ["key", "options"]
        func has(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { names.contains($0) } }
        #expect(has("key") && has("options"))
        #expect(!has("ke") && !has("keys") && !has("Key") && !has(""))
    }

    @Test func aByteNameTableGivesEachNameItsPositionAndNothingElseOne() {
        let table = ByteNameTable(["get", "set", "ab", "", "getMany"])
        func index(_ text: String) -> Int? { Array(text.utf8).withUnsafeBytes { table.index(of: $0) } }
        #expect(index("get") == 0 && index("set") == 1 && index("ab") == 2 && index("getMany") == 4)
        #expect(index("") == 3)
        #expect(index("gex") == nil && index("ba") == nil && index("getMan") == nil && index("getManyx") == nil)
        #expect(index(String(repeating: "g", count: 100)) == nil)
        let withoutEmpty = ByteNameTable(["a"])
        #expect(Array("".utf8).withUnsafeBytes { withoutEmpty.index(of: $0) } == nil)
    }
}
