// Objects that live until the process exits and are read by every event loop on every
// request: the method table's specs and their param names, the dispatcher's param rules.
// A counted reference to a shared object is an atomic write to its header, and two loops
// on two cores writing the same cache line take it from each other on every request. An
// immortal object's header says so, and the runtime's retain and release of it only read
// that header.

import SwiftShims

/// Makes objects immortal: never freed, and counted references to them never written.
///
/// Threading: `keep` must run before the object is shared (at start, while it is built).
public enum Immortal {
    /// Marks `object` immortal and returns it. Whatever it holds is kept with it, so only
    /// objects the process needs until it exits, or a bounded number of them, belong here.
    @discardableResult
    public static func keep<T: AnyObject>(_ object: T) -> T {
        _swift_stdlib_immortalize(Unmanaged.passUnretained(object).toOpaque())
        return object
    }
}
