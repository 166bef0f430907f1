// The seeded generator lives in the shared test support; imported once for the module.

@_exported import HalcyonTestSupport
