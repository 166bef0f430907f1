// The daemon's malloc. halcyond links jemalloc, so every allocation of the process (Swift
// runtime, SwiftNIO, libjansson) goes to it instead of glibc's malloc.
//
// Why: replies, closures and journal records are allocated on one thread (the ioQueue, a
// callback queue) and freed on another (an event loop). glibc returns such a chunk to the
// arena of the thread that allocated it, under that arena's lock, so under a write load
// the threads queue on those locks. jemalloc's per-thread caches free such a chunk without
// that lock, which cuts the server CPU of a set by about a third (Benchmarks/RESULTS.md,
// "The daemon's malloc: jemalloc against glibc"). Redis ships jemalloc for the same reason.

#if canImport(CJemalloc)
import CJemalloc

enum Allocator {
    /// "jemalloc <version>", as the library reports itself; proves it is the one linked.
    static var description: String {
        var version: UnsafePointer<CChar>?
        var size = MemoryLayout<UnsafePointer<CChar>?>.size
        guard mallctl("version", &version, &size, nil, 0) == 0, let version else { return "jemalloc (version unknown)" }
        return "jemalloc " + String(cString: version)
    }
}
#else
// Built with HALCYON_SYSTEM_MALLOC set (see Package.swift): for ThreadSanitizer only.
enum Allocator {
    static var description: String { "the system's malloc" }
}
#endif
