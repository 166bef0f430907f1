// The release number, in one place for both executables.
//
// The repository's source of truth is the `VERSION` file at its root; SwiftPM cannot read
// a file into a constant without a build plugin, so the number is repeated here and in
// `Clients/python/pyproject.toml`, and `VersionTests` fails the build's tests as soon as
// the three disagree.

/// What `halcyond --version`, `halcyon --version` and `server.info` report.
///
/// Threading: constants only; any thread.
public enum HalcyonVersion {
    /// The release number, as in `VERSION`.
    public static let current = "0.1.0"
}
