// halcyond's entry point: all logic is in HalcyondCommand (flags) and HalcyonServer, so no
// closure here is inferred @MainActor by accident (see swift-on-linux-facts.md).
HalcyondCommand.start()
