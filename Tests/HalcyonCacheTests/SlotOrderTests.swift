// The slot order both the memory tier's recency and the unwritten table's journal order
// keep: taking, moving and releasing slots, and reusing the released ones.

import Testing

@testable import HalcyonCache

@Suite("SlotOrder", .timeLimit(.minutes(1)))
struct SlotOrderTests {
    static func walk(_ order: SlotOrder) -> [Int32] {
        var out: [Int32] = []
        var slot = order.oldest
        while slot != SlotOrder.none {
            out.append(slot)
            slot = order.newer(than: slot)
        }
        return out
    }

    @Test func takenSlotsAreNewestAndMovesKeepTheOthersInOrder() {
        var order = SlotOrder()
        #expect(order.oldest == SlotOrder.none && order.newest == SlotOrder.none)
        for expected in Int32(0)..<4 {
            let (slot, reused) = order.take()
            #expect(slot == expected && !reused)
        }
        #expect(Self.walk(order) == [0, 1, 2, 3])
        order.moveToNewest(0)
        order.moveToNewest(2)
        order.moveToNewest(2)
        #expect(Self.walk(order) == [1, 3, 0, 2])
        #expect(order.oldest == 1 && order.newest == 2)
    }

    @Test func releasedSlotsLeaveTheOrderAndAreTakenAgainFirst() {
        var order = SlotOrder()
        for _ in 0..<4 { _ = order.take() }
        order.release(0)
        order.release(2)
        #expect(Self.walk(order) == [1, 3])
        let again = order.take()
        #expect(again.slot == 2 && again.reused)
        #expect(order.take().slot == 0)
        #expect(order.take() == (slot: 4, reused: false))
        #expect(Self.walk(order) == [1, 3, 2, 0, 4])
        order.release(1)
        order.release(4)
        #expect(Self.walk(order) == [3, 2, 0])
        order.release(3)
        order.release(2)
        order.release(0)
        #expect(order.oldest == SlotOrder.none && order.newest == SlotOrder.none)
        order.removeAll()
        #expect(order.take() == (slot: 0, reused: false))
    }
}
