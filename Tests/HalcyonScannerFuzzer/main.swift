// The scanner's differential fuzz entry point, built like halcyon-fuzz: by
// scripts/fuzz-scanner with -sanitize=fuzzer and -DFUZZING it hands the process to
// libFuzzer's driver with `ScannerFuzzer.check` as the per-input callback; built normally it
// replays the files named on the command line and exits 1 on the first disagreement.

import CFuzzerDriver
import Foundation
import HalcyonScannerFuzzing

private let fuzzer = ScannerFuzzer()

/// The share of inputs the scanner took, so a run shows it exercised both paths.
func report() {
    FileHandle.standardError.write(Data("scanner took \(fuzzer.scanned) inputs, deferred \(fuzzer.deferred)\n".utf8))
}

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
// The driver calls exit itself when -max_total_time is up, so the count is printed from atexit.
atexit { report() }
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
report()
exit(failed ? 1 : 0)
#endif
