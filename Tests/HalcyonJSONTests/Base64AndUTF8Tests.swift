import Foundation
import HalcyonJSON
import Testing

@Suite struct Base64AndUTF8Tests {
    @Test func strictBase64AcceptsOnlyCanonicalStandardForms() {
        #expect(StrictBase64.decode("") == [])
        #expect(StrictBase64.decode("Zg==") == Array("f".utf8))
        #expect(StrictBase64.decode("Zm8=") == Array("fo".utf8))
        #expect(StrictBase64.decode("Zm9v") == Array("foo".utf8))
        #expect(StrictBase64.decode("//4=") == [0xFF, 0xFE])
        for bad in ["Zg", "Zg=", "Zh==", "Zm9=", "Zm 9v", "Zm9v\n", "Zg-_", "_-8=", "Z===", "=Zg=", "Zm9vY", "Zg==Zg=="] {
            #expect(StrictBase64.decode(bad) == nil, "\(bad)")
        }
    }

    @Test func strictBase64AgreesWithFoundation() {
        var rng = SplitMix64(seed: 0x5EED_0004)
        for _ in 0..<1000 {
            let data = rng.bytes()
            let ours = StrictBase64.encodeToString(data)
            #expect(ours == Data(data).base64EncodedString())
            #expect(StrictBase64.decode(ours) == data)
        }
    }

    @Test func utf8ValidationAgreesWithTheStandardLibrary() {
        var rng = SplitMix64(seed: 0x5EED_0005)
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = Array(rng.string().utf8)
                if !bytes.isEmpty && round % 4 == 0 {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0x80...0xFF, using: &rng)
                }
            } else {
                bytes = rng.bytes(maxLength: 12).map { $0 | (round % 3 == 0 ? 0x80 : 0) }
            }
            let expected = String(validating: bytes, as: UTF8.self) != nil
            #expect(isValidUTF8(bytes) == expected, "\(bytes)")
        }
    }

    @Test func utf8ValidationEdgeCases() {
        #expect(isValidUTF8([UInt8]()))
        #expect(isValidUTF8(Array("plain ascii longer than eight bytes".utf8)))
        #expect(!isValidUTF8([0xC0, 0x80]))            // overlong NUL
        #expect(!isValidUTF8([0xE0, 0x80, 0x80]))      // overlong
        #expect(!isValidUTF8([0xED, 0xA0, 0x80]))      // surrogate
        #expect(!isValidUTF8([0xF4, 0x90, 0x80, 0x80])) // above U+10FFFF
        #expect(!isValidUTF8([0x61, 0xE2, 0x82]))      // truncated
        #expect(isValidUTF8([0xF4, 0x8F, 0xBF, 0xBF])) // U+10FFFF
        #expect(isValidUTF8(Array("abcdefgh€".utf8)))
        #expect(!isValidUTF8(Array("abcdefgh".utf8) + [0xFF]))
    }
}
