// A small deterministic RNG (SplitMix64) so property tests are reproducible from their
// seed (Swift Testing has no hypothesis-style generator).

/// Threading: a value; each test owns its own.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SplitMix64 {
    /// A random Unicode scalar, biased towards the interesting ones: controls, quotes,
    /// backslashes, U+2028/2029, the edges of each UTF-8 length, astral planes.
    public mutating func scalar() -> Unicode.Scalar {
        let special: [UInt32] = [0, 1, 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x1F, 0x20, 0x22, 0x2F, 0x5C, 0x7F, 0x80,
                                 0x7FF, 0x800, 0xFFFD, 0xFFFF, 0x2028, 0x2029, 0xD7FF, 0xE000, 0x10000,
                                 0x1F600, 0x10FFFF]
        switch Int.random(in: 0..<6, using: &self) {
        case 0: return Unicode.Scalar(special.randomElement(using: &self)!)!
        case 1: return Unicode.Scalar(UInt32.random(in: 0..<0x20, using: &self))!
        case 2: return Unicode.Scalar(UInt32.random(in: 0x20..<0x80, using: &self))!
        default:
            while true {
                let v = UInt32.random(in: 0...0x10FFFF, using: &self)
                if let s = Unicode.Scalar(v) { return s }
            }
        }
    }

    public mutating func string(maxLength: Int = 40) -> String {
        var s = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...maxLength, using: &self) { s.append(scalar()) }
        return String(s)
    }

    public mutating func bytes(maxLength: Int = 300) -> [UInt8] {
        (0..<Int.random(in: 0...maxLength, using: &self)).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}
