// Writing RESP3: commands as arrays of blob strings (all a server accepts), and any value
// in its canonical (non-streamed) form, which the tests and the fuzzer round-trip.

import NIOCore

extension ByteBuffer {
    /// Appends a command: an array of blob strings, one per argument.
    public mutating func writeRESP3Command(_ arguments: [ByteBuffer]) {
        writeRESP3Header(UInt8(ascii: "*"), arguments.count)
        for argument in arguments {
            writeRESP3Header(UInt8(ascii: "$"), argument.readableBytes)
            writeImmutableBuffer(argument)
            writeStaticString("\r\n")
        }
    }

    /// Appends `value` in RESP3's canonical form: lengths declared, never streamed; a
    /// double as its shortest decimal text (or `inf`, `-inf`, `nan`).
    public mutating func writeRESP3(_ value: RESP3Value) {
        switch value {
        case .simpleString(let text): writeRESP3Line(UInt8(ascii: "+"), text)
        case .simpleError(let text): writeRESP3Line(UInt8(ascii: "-"), text)
        case .integer(let number): writeRESP3Line(UInt8(ascii: ":"), ByteBuffer(string: String(number)))
        case .blobString(let bytes): writeRESP3Blob(UInt8(ascii: "$"), bytes)
        case .blobError(let bytes): writeRESP3Blob(UInt8(ascii: "!"), bytes)
        case .null: writeStaticString("_\r\n")
        case .double(let number):
            let text: String
            if number.isNaN { text = "nan" } else if number == .infinity { text = "inf" }
            else if number == -.infinity { text = "-inf" } else { text = "\(number)" }
            writeRESP3Line(UInt8(ascii: ","), ByteBuffer(string: text))
        case .boolean(let flag): writeStaticString(flag ? "#t\r\n" : "#f\r\n")
        case .bigNumber(let digits): writeRESP3Line(UInt8(ascii: "("), ByteBuffer(string: digits))
        case .verbatimString(let format, let text):
            var body = ByteBuffer(string: format)
            body.writeStaticString(":")
            body.writeImmutableBuffer(text)
            writeRESP3Blob(UInt8(ascii: "="), body)
        case .array(let elements): writeRESP3Aggregate(UInt8(ascii: "*"), elements)
        case .set(let elements): writeRESP3Aggregate(UInt8(ascii: "~"), elements)
        case .push(let elements): writeRESP3Aggregate(UInt8(ascii: ">"), elements)
        case .map(let pairs): writeRESP3Pairs(UInt8(ascii: "%"), pairs)
        case .attributed(let attributes, let described):
            writeRESP3Pairs(UInt8(ascii: "|"), attributes)
            writeRESP3(described)
        }
    }

    private mutating func writeRESP3Header(_ type: UInt8, _ count: Int) {
        writeInteger(type)
        writeString(String(count))
        writeStaticString("\r\n")
    }

    private mutating func writeRESP3Line(_ type: UInt8, _ text: ByteBuffer) {
        writeInteger(type)
        writeImmutableBuffer(text)
        writeStaticString("\r\n")
    }

    private mutating func writeRESP3Blob(_ type: UInt8, _ bytes: ByteBuffer) {
        writeRESP3Header(type, bytes.readableBytes)
        writeImmutableBuffer(bytes)
        writeStaticString("\r\n")
    }

    private mutating func writeRESP3Aggregate(_ type: UInt8, _ elements: [RESP3Value]) {
        writeRESP3Header(type, elements.count)
        for element in elements { writeRESP3(element) }
    }

    private mutating func writeRESP3Pairs(_ type: UInt8, _ pairs: [RESP3Value.Pair]) {
        writeRESP3Header(type, pairs.count)
        for pair in pairs {
            writeRESP3(pair.key)
            writeRESP3(pair.value)
        }
    }
}
