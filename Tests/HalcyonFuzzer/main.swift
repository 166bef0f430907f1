// The fuzz entry point. Built by scripts/fuzz with -sanitize=fuzzer and -DFUZZING, it is
// libFuzzer's LLVMFuzzerTestOneInput (libFuzzer brings its own main). Built normally, it
// replays the files named on the command line and exits 1 on the first bad reply, so the
// ordinary build keeps compiling it.

import Foundation
import HalcyonFuzzing

#if FUZZING
nonisolated(unsafe) private let fuzzer = RequestFuzzer()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    if let problem = fuzzer.check(UnsafeRawBufferPointer(start: data, count: count)) {
        fatalError(problem)
    }
    return 0
}
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
