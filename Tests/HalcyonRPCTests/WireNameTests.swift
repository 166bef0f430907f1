// The fixed names the reply writer copies as static strings repeat the enums' raw values,
// which the rest of the protocol reads: the two must never drift apart.

import HalcyonCache
@testable import HalcyonRPC
import Testing

@Suite struct WireNameTests {
    func text(_ name: StaticString) -> String { name.withUTF8Buffer { String(decoding: $0, as: UTF8.self) } }

    @Test func everyWireNameIsItsRawValue() {
        for type in CacheType.allCases {
            #expect(text(type.wireName) == type.rawValue)
        }
        for encoding in ValueEncoding.allCases {
            #expect(text(encoding.wireName) == encoding.rawValue)
        }
    }
}
