import Foundation
import HalcyonVersion
import Testing

/// `VERSION` is the repository's one version; the Swift constant and the Python package
/// repeat it, and this suite fails as soon as one of them drifts.
@Suite struct VersionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    @Test func swiftConstantMatchesVersionFile() throws {
        let file = try String(contentsOf: Self.root.appendingPathComponent("VERSION"), encoding: .utf8)
        #expect(file.trimmingCharacters(in: .whitespacesAndNewlines) == HalcyonVersion.current)
    }

    @Test func pythonPackageMatchesVersionFile() throws {
        let initFile = try String(
            contentsOf: Self.root.appendingPathComponent("Clients/python/src/halcyon/__init__.py"), encoding: .utf8
        )
        #expect(initFile.contains("__version__ = \"\(HalcyonVersion.current)\""))
    }
}
