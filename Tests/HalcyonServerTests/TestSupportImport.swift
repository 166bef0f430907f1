// Every test file of this target uses the shared support (TestClient, DaemonProcess,
// CLIProcess, SplitMix64, failuresAcrossClients), so it is imported once for the whole module.

@_exported import HalcyonTestSupport
