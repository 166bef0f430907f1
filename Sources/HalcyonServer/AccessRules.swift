// The rules file of `halcyond --access FILE`: who may connect, in which namespace, with
// which rights. Parsed at start (a bad file stops the daemon) and again on SIGHUP (a bad
// file keeps the rules in force); matched once per accepted connection.

import Foundation
import Glibc
import HalcyonCache
import HalcyonRPC

/// The rules of an access file, in file order; the first that matches a peer decides.
///
/// One rule per line, `#` to the end of a line is a comment, blank lines are skipped:
///
///     # WHO                 NAMESPACE   RIGHTS              QUOTAS (optional)
///     user www-data         web         read,write          memory=64MiB disk=1GiB
///     group analytics       analytics   read,write
///     uid 1001              reports     read
///     user ops              *           read,write,admin
///     group halcyon-users   $user       read,write
///
/// WHO is `user NAME`, `uid N`, `group NAME` or `gid N`; a group matches a peer's primary
/// or supplementary groups, as `--allow-gid` does. NAMESPACE is a name
/// (`KeyNamespace.isValidName`), `$user` (the peer's user name, looked up when it
/// connects; a peer whose name is not a valid namespace name, or who has none, does not
/// match the line) or `*` (the whole keyspace: needs `admin`). RIGHTS are `read`,
/// `write`, `admin`, separated by commas. QUOTAS: `memory=SIZE` bounds the namespace's
/// bytes in the memory tier (`Quotas`; a namespace over it loses its own least recently
/// used entries); `disk=SIZE` bounds its bytes in the disk tier likewise. A named
/// namespace's quota is the first line's that names it and carries one. On a `$user` line
/// the quotas are each user's own: every namespace the line grants gets them, once the
/// namespace is learnt (its first connection), for any bound no named line sets
/// (`quotas(learnt:)`). A `*` line may carry none: it spans every namespace, and the
/// tiers' own limits already bound the whole cache.
///
/// A peer no line matches is refused, except root and the daemon's own user (who could
/// read the cache folder anyway): they get the whole keyspace with every right.
///
/// User and group names are resolved when the file is read, so a rule names the account
/// it named then. An immutable value: any thread.
public struct AccessRules: Sendable, Equatable {
    /// One line of the file.
    public struct Rule: Sendable, Equatable {
        /// Whom a line names.
        public enum Who: Sendable, Equatable {
            case uid(uid_t)
            case gid(gid_t)
        }

        /// The keyspace a line grants.
        public enum Scope: Sendable, Equatable {
            /// One namespace, by name.
            case namespace(KeyNamespace)
            /// The namespace named as the peer's user (`$user`).
            case peerUser
            /// The whole keyspace, where an admin may name any namespace (`*`).
            case everything
        }

        public var who: Who
        public var scope: Scope
        public var rights: AccessRights
        /// The namespace's memory quota in bytes (`memory=`); nil for none.
        public var memoryQuota: Int? = nil
        /// The namespace's disk quota in bytes (`disk=`); nil for none.
        public var diskQuota: UInt64? = nil
        /// The line of the file it was read from, for logs.
        public var line: Int

        /// Whether `peer` is the one this line names.
        func names(_ peer: PeerCredentials) -> Bool {
            switch who {
            case .uid(let uid): return peer.uid == uid
            case .gid(let gid): return peer.gid == gid || peer.groups.contains(gid)
            }
        }
    }

    /// A line that does not parse; `description` names it.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The 1-based line number; 0 when the file could not be read.
        public var line: Int
        public var description: String

        init(line: Int, message: String) {
            self.line = line
            description = line == 0 ? message : "line \(line): \(message)"
        }

    }

    public let rules: [Rule]
    /// The daemon's own effective uid: with root, admitted when no line matches.
    public let ownUID: uid_t

    public init(rules: [Rule], ownUID: uid_t = geteuid()) {
        self.rules = rules
        self.ownUID = ownUID
    }

    /// Reads and parses the file at `path`.
    /// - Throws: a `ParseError` naming the line, or line 0 when the file cannot be read.
    public static func load(path: String, ownUID: uid_t = geteuid()) throws(ParseError) -> AccessRules {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ParseError(line: 0, message: "cannot read \(path): \(error.localizedDescription)")
        }
        return try parse(text, ownUID: ownUID)
    }

    /// Parses the text of a rules file; names are resolved with the system's databases.
    public static func parse(_ text: String, ownUID: uid_t = geteuid()) throws(ParseError) -> AccessRules {
        var rules: [Rule] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = rawLine.prefix { $0 != "#" }
            let words = content.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            if words.isEmpty { continue }
            rules.append(try parseRule(words, line: index + 1))
        }
        return AccessRules(rules: rules, ownUID: ownUID)
    }

    private static func parseRule(_ words: [String], line: Int) throws(ParseError) -> Rule {
        func fail(_ message: String) -> ParseError { ParseError(line: line, message: message) }
        guard words.count >= 4 else {
            throw fail("expected WHO NAMESPACE RIGHTS, e.g. 'group halcyon-users $user read,write'")
        }
        let who: Rule.Who
        switch words[0] {
        case "user", "uid":
            if words[0] == "uid", uid_t(words[1]) == nil { throw fail("'\(words[1])' is not a uid") }
            do { who = .uid(try AccountNames.userID(words[1])) } catch { throw fail(error.description) }
        case "group", "gid":
            if words[0] == "gid", gid_t(words[1]) == nil { throw fail("'\(words[1])' is not a gid") }
            do { who = .gid(try AccountNames.groupID(words[1])) } catch { throw fail(error.description) }
        default:
            throw fail("'\(words[0])' is not one of user, uid, group, gid")
        }
        var rights = AccessRights()
        for name in words[3].split(separator: ",", omittingEmptySubsequences: false) {
            guard let right = AccessRights.named.first(where: { $0.name == name })?.right else {
                throw fail("'\(name)' is not one of the rights read, write, admin")
            }
            rights.insert(right)
        }
        let scope: Rule.Scope
        switch words[2] {
        case "*":
            guard rights.contains(.admin) else { throw fail("the namespace '*' needs the admin right") }
            scope = .everything
        case "$user":
            scope = .peerUser
        default:
            guard let namespace = KeyNamespace(words[2]) else {
                throw fail("'\(words[2])' is not a namespace: 1 to \(KeyNamespace.maxNameBytes) letters, digits, "
                    + "'-', '_' or '.', or $user, or *")
            }
            scope = .namespace(namespace)
        }
        var memoryQuota: Int?
        var diskQuota: UInt64?
        for quota in words.dropFirst(4) {
            let parts = quota.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, ["memory", "disk"].contains(parts[0]) else {
                throw fail("'\(quota)' is not a quota (memory=SIZE or disk=SIZE)")
            }
            let bytes: Int
            do { bytes = try HumanUnits.parseIntByteCount(parts[1]) } catch { throw fail("\(parts[0]): \(error.description)") }
            if case .everything = scope {
                throw fail("quotas need a namespace: '*' spans every namespace, and the tiers' own limits "
                    + "(--memory-limit, --disk-size-limit) bound the whole cache")
            }
            if parts[0] == "disk" { diskQuota = UInt64(bytes) } else { memoryQuota = bytes }
        }
        return Rule(who: who, scope: scope, rights: rights, memoryQuota: memoryQuota, diskQuota: diskQuota, line: line)
    }

    /// The namespaces the lines name, in file order, once each.
    public var namedNamespaces: [KeyNamespace] {
        var seen = Set<KeyNamespace>()
        return rules.compactMap { rule -> KeyNamespace? in
            guard case .namespace(let namespace) = rule.scope, seen.insert(namespace).inserted else { return nil }
            return namespace
        }
    }

    /// Whether a `$user` line carries quotas (each namespace it grants then gets them
    /// when it is learnt).
    public var hasPeerUserQuotas: Bool {
        rules.contains { rule in
            guard case .peerUser = rule.scope else { return false }
            return rule.memoryQuota != nil || rule.diskQuota != nil
        }
    }

    /// The storage engine's quotas: each named namespace's memory and disk quotas, each
    /// from the first line of the namespace that carries it.
    public var quotas: Quotas { quotas(learnt: [:]) }

    /// `quotas`, and for each learnt `$user` namespace (with the peer it was learnt from)
    /// the quotas of the line that grants it to that peer now, for each bound no named
    /// line sets. A namespace whose peer now matches another line, or a line without
    /// quotas, gets none from it.
    public func quotas(learnt: [KeyNamespace: PeerCredentials]) -> Quotas {
        var quotas = Quotas()
        func add(_ rule: Rule, to namespace: KeyNamespace) {
            var limits = quotas.limits[namespace] ?? Quotas.Limits()
            if limits.memory == 0, let memory = rule.memoryQuota { limits.memory = memory }
            if limits.disk == 0, let disk = rule.diskQuota { limits.disk = disk }
            if limits != Quotas.Limits() { quotas.limits[namespace] = limits }
        }
        for rule in rules {
            guard case .namespace(let namespace) = rule.scope else { continue }
            add(rule, to: namespace)
        }
        for (namespace, peer) in learnt {
            // The name the namespace was learnt as, so that a renamed account cannot move it.
            guard let granted = grant(for: peer, userName: { _ in namespace.name }), let rule = granted.rule,
                  case .peerUser = rule.scope, granted.access.namespace == namespace else { continue }
            add(rule, to: namespace)
        }
        return quotas
    }

    /// The user `namespace` is the `$user` namespace of: the user of that name (whose
    /// credentials `credentials` gives), when the rules grant it that namespace through a
    /// `$user` line; else nil.
    public func peerUserOwner(of namespace: KeyNamespace, credentials: (String) -> PeerCredentials?) -> PeerCredentials? {
        guard let peer = credentials(namespace.name),
              let granted = grant(for: peer, userName: { _ in namespace.name }), let rule = granted.rule,
              case .peerUser = rule.scope, granted.access.namespace == namespace
        else { return nil }
        return peer
    }

    /// The namespace and rights of `peer`: the first line that names it and grants it a
    /// namespace; else every right on the whole keyspace for root and the daemon's own
    /// user; else nil (refused). `userName` gives a uid's user name, for `$user`; it is
    /// called only when a `$user` line names the peer.
    public func access(
        for peer: PeerCredentials, userName: (uid_t) -> String? = AccountNames.userName
    ) -> ConnectionAccess? {
        grant(for: peer, userName: userName)?.access
    }

    /// `access(for:userName:)` with the line that granted it (nil: root or the daemon's
    /// own user, whom no line names).
    func grant(for peer: PeerCredentials, userName: (uid_t) -> String?) -> (rule: Rule?, access: ConnectionAccess)? {
        for rule in rules where rule.names(peer) {
            switch rule.scope {
            case .namespace(let namespace):
                return (rule, ConnectionAccess(namespace: namespace, rights: rule.rights))
            case .everything:
                return (rule, ConnectionAccess(namespace: nil, rights: rule.rights))
            case .peerUser:
                if let name = userName(peer.uid), let namespace = KeyNamespace(name) {
                    return (rule, ConnectionAccess(namespace: namespace, rights: rule.rights))
                }
            }
        }
        if peer.uid == 0 || peer.uid == ownUID { return (nil, ConnectionAccess(namespace: nil, rights: [.read, .write, .admin])) }
        return nil
    }
}
