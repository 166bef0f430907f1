// halcyond's entry point: all logic is in HalcyondCommand (flags) and HalcyonServer, so no
// closure here is inferred @MainActor by accident (top-level closures are, and one handed
// to a Dispatch source for another queue traps at run time without a compiler warning).
HalcyondCommand.start()
