// A parsed text kept flat: its bytes and a table of nodes in document order, in one
// block. `JSONScanner` makes one per plain request line, so reading a request's
// members costs no jansson tree (about fifteen allocations for a get) and no hashing:
// objects hold a handful of members and are searched by length and bytes.

import CJansson
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One JSON text of the scanner's subset (see `JSONScanner`), held as its bytes and a node
/// table. Read it through `root` (a `JSONView`); `tree` builds the jansson tree the same
/// text parses to, for the few readers that need a `JSONValue` of their own.
///
/// Layout: one block holds the nodes, then the text. A node's strings (a member's name, a
/// string's contents) are spans of the text, so nothing is copied twice.
///
/// Threading: immutable after `make`; any thread.
// @unchecked Sendable: the block is written once, before `make` returns the document, and
// only read afterwards; immutable memory needs no lock.
public final class FlatJSON: @unchecked Sendable {
    private let nodes: UnsafeMutablePointer<Node>
    private let text: UnsafeMutablePointer<UInt8>

    /// One value of the text.
    @usableFromInline struct Node {
        /// What the node is; a boolean's value is in its kind.
        @usableFromInline enum Kind: UInt8 { case object, string, integer, `true`, `false`, null }

        @usableFromInline var kind: Kind
        /// For a member of an object: its name's span in the text; else empty.
        @usableFromInline var nameStart: Int32 = 0
        @usableFromInline var nameCount: Int32 = 0
        /// A string's contents (without the quotes); for other kinds, the value's text.
        @usableFromInline var start: Int32
        @usableFromInline var count: Int32
        /// The index just past this node's subtree: its next sibling, for an object member.
        @usableFromInline var next: Int32
        /// An object's number of members.
        @usableFromInline var members: Int32 = 0
        /// An integer's value.
        @usableFromInline var integer: Int64 = 0

        @usableFromInline init(kind: Kind, start: Int, count: Int, next: Int) {
            self.kind = kind
            self.start = Int32(start)
            self.count = Int32(count)
            self.next = Int32(next)
        }
    }

    private init(nodes: UnsafeMutablePointer<Node>, text: UnsafeMutablePointer<UInt8>) {
        self.nodes = nodes
        self.text = text
    }

    deinit {
        UnsafeMutableRawPointer(nodes).deallocate()
    }

    /// Builds a document from `nodes` (index 0 is the root) over a copy of `text`.
    static func make(nodes: UnsafeBufferPointer<Node>, text: UnsafeRawBufferPointer) -> FlatJSON {
        let nodeBytes = nodes.count * MemoryLayout<Node>.stride
        let block = UnsafeMutableRawPointer.allocate(byteCount: nodeBytes + max(text.count, 1),
                                                     alignment: MemoryLayout<Node>.alignment)
        if let base = nodes.baseAddress { block.copyMemory(from: base, byteCount: nodeBytes) }
        if let base = text.baseAddress { (block + nodeBytes).copyMemory(from: base, byteCount: text.count) }
        return FlatJSON(nodes: block.bindMemory(to: Node.self, capacity: nodes.count),
                        text: (block + nodeBytes).bindMemory(to: UInt8.self, capacity: text.count))
    }

    /// The root value, valid while this document lives (see `JSONView`).
    public var root: JSONView { JSONView(flat: FlatNodeRef(nodes: nodes, text: text, index: 0)) }

    /// The jansson tree `json_loadb` builds from the same text (one new reference).
    public var tree: JSONValue { withExtendedLifetime(self) { root.owned } }
}

/// A node of a `FlatJSON` document, borrowed like a `JSONView`.
///
/// Threading: a local value; see `JSONView`.
@usableFromInline struct FlatNodeRef {
    @usableFromInline let nodes: UnsafePointer<FlatJSON.Node>
    @usableFromInline let text: UnsafePointer<UInt8>
    @usableFromInline let index: Int

    @usableFromInline init(nodes: UnsafePointer<FlatJSON.Node>, text: UnsafePointer<UInt8>, index: Int) {
        self.nodes = nodes
        self.text = text
        self.index = index
    }

    @inlinable var node: FlatJSON.Node { nodes[index] }

    @inlinable func at(_ other: Int) -> FlatNodeRef { FlatNodeRef(nodes: nodes, text: text, index: other) }

    /// A string's contents, or a member's name.
    @inlinable var contents: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: text + Int(node.start), count: Int(node.count))
    }

    @inlinable var name: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: text + Int(node.nameStart), count: Int(node.nameCount))
    }

    /// Calls `body` with each member of an object, in document order, until it returns false.
    @inlinable func forEachMember(_ body: (FlatNodeRef) throws -> Bool) rethrows {
        let this = node
        guard this.kind == .object else { return }
        var child = index + 1
        let end = Int(this.next)
        while child < end {
            let member = at(child)
            guard try body(member) else { return }
            child = Int(nodes[child].next)
        }
    }

    /// The member named by `name`'s bytes; nil when absent or not an object.
    @inlinable func member(_ name: UnsafeRawBufferPointer) -> FlatNodeRef? {
        var found: FlatNodeRef?
        forEachMember { member in
            let node = member.node
            guard Int(node.nameCount) == name.count else { return true }
            if name.count == 0 || memcmp(text + Int(node.nameStart), name.baseAddress!, name.count) == 0 {
                found = member
                return false
            }
            return true
        }
        return found
    }

    /// A new jansson tree for this node, built from the same values `JSONView` reads.
    func makeTree() -> UnsafeMutablePointer<json_t>? {
        let this = node
        switch this.kind {
        case .string:
            return contents.withMemoryRebound(to: CChar.self) { json_stringn_nocheck($0.baseAddress, $0.count) }
        case .integer: return json_integer(this.integer)
        case .true: return json_true()
        case .false: return json_false()
        case .null: return json_null()
        case .object:
            guard let object = json_object() else { return nil }
            var failed = false
            forEachMember { member in
                // `_new` takes over the value's reference, even when it fails.
                guard let value = member.makeTree(),
                      member.name.withMemoryRebound(to: CChar.self, { name in
                          json_object_setn_new_nocheck(object, name.baseAddress, name.count, value)
                      }) == 0 else {
                    failed = true
                    return false
                }
                return true
            }
            if failed {
                json_decref(object)
                return nil
            }
            return object
        }
    }
}
