// The address forms a user writes for an upstream server: `redis://[user@]host:port[/db]`
// and `unix:///path/redis.sock`, read into the client's configuration.

/// One parsed upstream address.
///
/// ```swift
/// let url = try UpstreamURL("redis://cache@10.0.0.5:6379/2")
/// url.address    // .tcp(host: "10.0.0.5", port: 6379)
/// url.username   // "cache"
/// url.database   // 2
/// ```
///
/// A password in the URL (`user:password@`) is refused: it would show in `ps`, shell
/// history and logs; the password comes from a file the caller reads.
///
/// Threading: a value type; `Sendable`.
public struct UpstreamURL: Sendable, Equatable {
    public var address: NodeAddress
    public var username: String?
    public var database: Int

    /// Why a URL was refused.
    public enum Invalid: Error, Sendable, Equatable {
        /// Neither `redis://` nor `unix://`.
        case unsupportedScheme
        /// `user:password@`: passwords go in a file.
        case passwordInURL
        /// No host, a bad port, or a bad database number.
        case malformed(String)
    }

    public init(_ text: String) throws(Invalid) {
        if text.hasPrefix("unix://") {
            let path = String(text.dropFirst("unix://".count))
            guard path.hasPrefix("/") else { throw .malformed("unix:// needs an absolute path") }
            self.init(address: .unix(path: path), username: nil, database: 0)
            return
        }
        guard text.hasPrefix("redis://") else { throw .unsupportedScheme }
        var rest = Substring(text.dropFirst("redis://".count))
        var username: String?
        if let at = rest.lastIndex(of: "@") {
            let user = rest[..<at]
            guard !user.contains(":") else { throw .passwordInURL }
            username = user.isEmpty ? nil : String(user)
            rest = rest[rest.index(after: at)...]
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let number = rest[rest.index(after: slash)...]
            if !number.isEmpty {
                guard let parsed = Int(number), parsed >= 0 else { throw .malformed("database \(number)") }
                database = parsed
            }
            rest = rest[..<slash]
        }
        let hostPort = rest.contains(":") ? String(rest) : "\(rest):6379"
        guard !rest.isEmpty, let address = NodeAddress(hostPort: hostPort) else { throw .malformed(String(rest)) }
        self.init(address: address, username: username, database: database)
    }

    public init(address: NodeAddress, username: String?, database: Int) {
        self.address = address
        self.username = username
        self.database = database
    }
}

extension UpstreamURL.Invalid: CustomStringConvertible {
    /// What is wrong, in words, and what to write instead; one line for the operator.
    public var description: String {
        switch self {
        case .unsupportedScheme:
            return "an upstream address starts with redis:// (redis://[user@]host:port[/db]) "
                + "or unix:// (unix:///path/to/redis.sock)"
        case .passwordInURL:
            return "the address holds a password (user:password@), which ps and shell history would show; "
                + "write the password on the first line of a file only you can read and pass it with "
                + "--upstream-password-file FILE, keeping only the user in the address (redis://user@host:port)"
        case .malformed(let what):
            return "malformed address (\(what)); write redis://[user@]host:port[/db] or unix:///path/to/redis.sock"
        }
    }
}

extension UpstreamURL: CustomStringConvertible {
    /// The URL as a user would write it (it never holds a password).
    public var description: String {
        switch address {
        case .unix(let path): return "unix://\(path)"
        case .tcp: return "redis://" + (username.map { "\($0)@" } ?? "") + address.description + (database == 0 ? "" : "/\(database)")
        }
    }
}
