// The `halcyon` executable. No code beyond this call lives in top-level code: a closure
// written there is inferred @MainActor, and one run on another queue traps at run time.

#if canImport(Glibc)
import Glibc
#endif

exit(CLIMain.run(ArgumentWords.processArguments(), environment: ProcessEnvironment.read()))
