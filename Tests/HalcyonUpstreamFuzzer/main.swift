// The RESP3 fuzz entry point, built like halcyon-fuzz: by scripts/fuzz-resp3 with
// -sanitize=fuzzer and -DFUZZING it hands the process to libFuzzer's driver with
// `RESP3Fuzzer.check` as the per-input callback; built normally it replays the files named
// on the command line and exits 1 on the first failed check.

import CFuzzerDriver
import Foundation
import HalcyonUpstreamFuzzing

let fuzzer = RESP3Fuzzer()

#if FUZZING
/// libFuzzer's per-input callback, named as its runtime expects.
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
exit(LLVMFuzzerRunDriver(&argc, &argv, { fuzzOneInput($0, $1) }))
#else
var failed = false
for path in CommandLine.arguments.dropFirst() {
    guard let data = FileManager.default.contents(atPath: path) else { continue }
    if let problem = data.withUnsafeBytes({ fuzzer.check($0) }) {
        FileHandle.standardError.write(Data("\(path): \(problem)\n".utf8))
        failed = true
    }
}
exit(failed ? 1 : 0)
#endif
