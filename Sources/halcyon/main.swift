// The `halcyon` executable. No code beyond this call lives in top-level code, whose
// closures would be inferred @MainActor (see swift-on-linux-facts.md).

#if canImport(Glibc)
import Glibc
#endif

exit(CLIMain.run(ArgumentWords.processArguments(), environment: ProcessEnvironment.read()))
