// The `halcyon` executable. No code beyond this call lives in top-level code, whose
// closures would be inferred @MainActor (see swift-on-linux-facts.md).

import Foundation

exit(CLIMain.run(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment))
