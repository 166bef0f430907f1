import HalcyonCache
@testable import HalcyonRPC
import HalcyonSupport
import Synchronization
import Testing

@Suite struct ImmortalTests {
    /// Sets its flag when freed.
    final class Probe: Sendable {
        let freed: Flag
        init(_ freed: Flag) { self.freed = freed }
        deinit { freed.set() }
    }

    /// A flag with an address of its own, shared by reference.
    final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }

    @Test(arguments: [1, 100])
    func aKeptObjectOutlivesItsLastReferenceAndAnotherDoesNot(referencesWhenKept: Int) {
        let keptFreed = Flag(), plainFreed = Flag()
        do {
            let kept = Probe(keptFreed)
            let plain = Probe(plainFreed)
            // References counted before and after it is kept, and all dropped again.
            let before = Array(repeating: (kept, plain), count: referencesWhenKept)
            Immortal.keep(kept)
            let after = Array(repeating: (kept, plain), count: 100)
            #expect(before.count + after.count == referencesWhenKept + 100)
        }
        #expect(plainFreed.isSet, "the control object was not freed: the test cannot tell")
        #expect(!keptFreed.isSet)
    }

    @Test func theRequestPathsSharedObjectsAreImmortal() {
        #expect(!Self.isImmortal(ParamNames(["key"])), "an object made here counts as immortal: the check cannot tell")
        for spec in Dispatcher.methodTable {
            #expect(Self.isImmortal(spec), "\(spec.name)")
            #expect(Self.isImmortal(spec.params), "\(spec.name)'s params")
        }
        #expect(Self.isImmortal(Params.Rules.none))
    }

    /// Whether the runtime treats `object` as immortal: in the Swift runtime's object
    /// header (`RefCount.h`, 64-bit), the word after the metadata pointer holds the
    /// reference counts, and an immortal object has all 32 of its low bits set.
    static func isImmortal(_ object: AnyObject) -> Bool {
        let counts = withExtendedLifetime(object) {
            Unmanaged.passUnretained(object).toOpaque().load(fromByteOffset: 8, as: UInt64.self)
        }
        return counts & 0xFFFF_FFFF == 0xFFFF_FFFF
    }
}
