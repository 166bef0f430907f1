// The fuzz entry point. Built by scripts/fuzz with -sanitize=fuzzer and -DFUZZING, it hands
// the process to libFuzzer's driver with `RequestFuzzer.check` as the per-input callback:
// SwiftPM makes this file's entry point the executable's `main`, so libFuzzer's own `main`
// never runs and the driver has to be called from here. Built normally, it replays the
// files named on the command line and exits 1 on the first bad reply, so the ordinary build
// keeps compiling it.

import CFuzzerDriver
import Foundation
import HalcyonFuzzing

#if FUZZING
private let fuzzer = RequestFuzzer()

/// libFuzzer's per-input callback; it calls in on the one thread that runs the driver. Named
/// as libFuzzer names it, because its runtime refers to that symbol as well.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : count)
    if let problem = fuzzer.check(bytes) {
        fatalError(problem)
    }
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
let status = LLVMFuzzerRunDriver(&argc, &argv, { fuzzOneInput($0, $1) })
fuzzer.removeFolder()
exit(status)
#else
let fuzzer = RequestFuzzer()
var failed = false
for path in CommandLine.arguments.dropFirst() {
    guard let data = FileManager.default.contents(atPath: path) else { continue }
    if let problem = data.withUnsafeBytes({ fuzzer.check($0) }) {
        FileHandle.standardError.write(Data("\(path): \(problem)\n".utf8))
        failed = true
    }
}
fuzzer.removeFolder()
exit(failed ? 1 : 0)
#endif
