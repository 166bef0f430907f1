import Foundation
import Glibc
import HalcyonCache
import HalcyonRPC
import Testing
@testable import HalcyonServer

/// The `--access` rules file: every form of a line, its errors with their line numbers,
/// and which line a peer matches.
@Suite struct AccessRulesTests {
    static let web = KeyNamespace("web")!

    func parse(_ text: String) throws -> AccessRules { try AccessRules.parse(text, ownUID: 1000) }

    func parseError(_ text: String) -> AccessRules.ParseError? {
        do { _ = try AccessRules.parse(text, ownUID: 1000); return nil } catch { return error }
    }

    @Test func everyFormOfWhoNamespaceAndRights() throws {
        let rules = try parse("""
            # WHO                 NAMESPACE   RIGHTS
            user root             web         read,write
            uid 1001              reports     read   # a comment after a rule

            group root            $user       read,write
            gid 77                *           read,write,admin
            """)
        #expect(rules.rules == [
            .init(who: .uid(0), scope: .namespace(Self.web), rights: [.read, .write], line: 2),
            .init(who: .uid(1001), scope: .namespace(KeyNamespace("reports")!), rights: [.read], line: 3),
            .init(who: .gid(0), scope: .peerUser, rights: [.read, .write], line: 5),
            .init(who: .gid(77), scope: .everything, rights: [.read, .write, .admin], line: 6),
        ])
    }

    @Test func badLinesAreNamedByTheirNumber() {
        #expect(parseError("uid 1 web read\nperson bob web read")?.description
            == "line 2: 'person' is not one of user, uid, group, gid")
        #expect(parseError("\n\nuid x web read")?.line == 3)
        #expect(parseError("gid nope web read")?.description == "line 1: 'nope' is not a gid")
        #expect(parseError("user no-such-user-halcyon web read")?.description
            == "line 1: no user named 'no-such-user-halcyon'")
        #expect(parseError("group no-such-group-halcyon web read")?.line == 1)
        #expect(parseError("uid 1 web")?.line == 1)
        #expect(parseError("uid 1 web read,delete")?.description
            == "line 1: 'delete' is not one of the rights read, write, admin")
        #expect(parseError("uid 1 web read,")?.line == 1)
        #expect(parseError("uid 1 we/b read")?.line == 1)
        #expect(parseError("uid 1 $home read")?.line == 1)
        #expect(parseError("# header\nuid 1 * read,write")?.description == "line 2: the namespace '*' needs the admin right")
    }

    @Test func quotasParseOnNamespaceLinesOnly() throws {
        let rules = try parse("uid 1 web read memory=64MiB\nuid 2 web read memory=1KiB\nuid 3 other read\nuid 4 $user read")
        #expect(rules.rules[0].memoryQuota == 64 << 20)
        #expect(rules.quotas == Quotas([KeyNamespace("web")!: .init(memory: 64 << 20)]))
        #expect(rules.namedNamespaces == [KeyNamespace("web")!, KeyNamespace("other")!])
        let both = try parse("uid 1 web read memory=64MiB disk=1GiB\nuid 2 web read disk=2GiB")
        #expect(both.quotas == Quotas([KeyNamespace("web")!: .init(memory: 64 << 20, disk: 1 << 30)]))
        #expect(parseError("uid 1 * read,admin memory=1MiB")?.description
            == "line 1: quotas need a namespace: '*' spans every namespace, and the tiers' own limits "
            + "(--memory-limit, --disk-size-limit) bound the whole cache")
        #expect(parseError("uid 1 web read\nuid 2 web read memory=lots")?.description.hasPrefix("line 2: memory:") == true)
        #expect(parseError("uid 1 web read cpu=2")?.description == "line 1: 'cpu=2' is not a quota (memory=SIZE or disk=SIZE)")
    }

    /// A `$user` line's quotas go to each namespace it grants once learnt, with the peer
    /// it was learnt from; a named line's quota wins for the bound it sets, and a learnt
    /// namespace whose peer now matches another line gets nothing from the `$user` line.
    @Test func userLineQuotasGoToEachLearntNamespace() throws {
        let rules = try parse("""
            uid 10 ada read,write memory=1MiB
            gid 100 $user read,write memory=16MiB disk=256MiB
            uid 30 $user read
            """)
        #expect(rules.hasPeerUserQuotas)
        #expect(rules.quotas == Quotas([KeyNamespace("ada")!: .init(memory: 1 << 20)]))
        let ada = PeerCredentials(pid: 1, uid: 10, gid: 100), bob = PeerCredentials(pid: 2, uid: 20, gid: 100)
        let cyd = PeerCredentials(pid: 3, uid: 30, gid: 300)
        let learnt = [KeyNamespace("ada")!: ada, KeyNamespace("bob")!: bob, KeyNamespace("cyd")!: cyd]
        #expect(rules.quotas(learnt: learnt) == Quotas([
            KeyNamespace("ada")!: .init(memory: 1 << 20),
            KeyNamespace("bob")!: .init(memory: 16 << 20, disk: 256 << 20),
        ]))
        let changed = try parse("gid 100 $user read,write memory=8MiB")
        #expect(changed.quotas(learnt: learnt) == Quotas([
            KeyNamespace("ada")!: .init(memory: 8 << 20), KeyNamespace("bob")!: .init(memory: 8 << 20),
        ]))
        let dropped = try parse("gid 100 $user read,write")
        #expect(!dropped.hasPeerUserQuotas)
        #expect(dropped.quotas(learnt: learnt) == Quotas())
    }

    /// The first connection of a namespace installs its quotas; one that comes while they
    /// are being installed waits for that; later ones, and all without `$user` quotas, go at once.
    @Test func aNamespaceIsLearntOnceAndItsLaterConnectionsWaitForItsQuotas() {
        var learnt = LearntNamespaces()
        let bob = KeyNamespace("bob")!, cyd = KeyNamespace("cyd")!
        let peer = PeerCredentials(pid: 1, uid: 20, gid: 100)
        #expect(learnt.admit(bob, peer: peer, quotas: true) == .install)
        #expect(learnt.admit(bob, peer: PeerCredentials(pid: 2, uid: 20, gid: 100), quotas: true) == .wait)
        learnt.installed(bob)
        #expect(learnt.admit(bob, peer: peer, quotas: true) == .now)
        #expect(learnt.admit(cyd, peer: peer, quotas: false) == .now)
        #expect(learnt.peers == [bob: peer, cyd: peer])
    }

    /// A stored namespace is a `$user` namespace when its name is a user's whom the rules
    /// grant it through a `$user` line; it is then learnt as that user's, and a connection
    /// of it waits for its quotas; a connection that learnt it first keeps it.
    @Test func aStoredNamespaceIsLearntAsItsUsersWhenAUserLineGrantsIt() throws {
        let rules = try parse("""
            uid 10 ada read,write
            gid 100 $user read,write memory=16MiB
            """)
        let users = ["ada": PeerCredentials(pid: 0, uid: 10, gid: 100), "bob": PeerCredentials(pid: 0, uid: 20, gid: 200, groups: [100]),
                     "cyd": PeerCredentials(pid: 0, uid: 30, gid: 300)]
        func owner(_ name: String) -> PeerCredentials? { rules.peerUserOwner(of: KeyNamespace(name)!) { users[$0] } }
        #expect(owner("bob") == users["bob"])
        #expect(owner("ada") == nil)  // her line names a namespace, not `$user`
        #expect(owner("cyd") == nil)  // no line grants him a namespace
        #expect(owner("dan") == nil)  // no such user

        var learnt = LearntNamespaces()
        let bob = KeyNamespace("bob")!, eve = KeyNamespace("eve")!
        let learntBob = learnt.learn(bob, peer: users["bob"]!)
        #expect(learntBob)
        #expect(learnt.admit(bob, peer: PeerCredentials(pid: 7, uid: 20, gid: 200), quotas: true) == .wait)
        learnt.installed(bob)
        #expect(learnt.admit(bob, peer: PeerCredentials(pid: 7, uid: 20, gid: 200), quotas: true) == .now)
        #expect(learnt.admit(eve, peer: PeerCredentials(pid: 8, uid: 40, gid: 100), quotas: true) == .install)
        let learntEve = learnt.learn(eve, peer: PeerCredentials(pid: 0, uid: 40, gid: 100))
        #expect(!learntEve)
        #expect(learnt.peers[bob] == users["bob"])
    }

    @Test func anUnreadableFileIsAnError() {
        do {
            _ = try AccessRules.load(path: "/nonexistent/halcyon-access.conf")
            Issue.record("loaded a file that does not exist")
        } catch {
            #expect(error.line == 0)
            #expect(error.description.contains("/nonexistent/halcyon-access.conf"))
        }
    }

    @Test func theFirstMatchingLineWins() throws {
        let rules = try parse("""
            uid 2001 web read
            uid 2001 other read,write
            gid 50   other read,write
            """)
        let peer = PeerCredentials(pid: 1, uid: 2001, gid: 50)
        #expect(rules.access(for: peer) == ConnectionAccess(namespace: Self.web, rights: [.read]))
        let groupOnly = PeerCredentials(pid: 1, uid: 2002, gid: 50)
        #expect(rules.access(for: groupOnly) == ConnectionAccess(namespace: KeyNamespace("other"), rights: [.read, .write]))
    }

    @Test func groupsMatchPrimaryAndSupplementary() throws {
        let rules = try parse("gid 50 web read")
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2000, gid: 50)) != nil)
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2000, gid: 2000, groups: [7, 50])) != nil)
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2000, gid: 2000, groups: [7, 51])) == nil)
    }

    @Test func userNamespaceIsThePeersName() throws {
        let rules = try parse("gid 50 $user read,write\ngid 50 fallback read")
        let names: (uid_t) -> String? = { uid in [2000: "alice", 2001: "bad name"][uid] }
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2000, gid: 50), userName: names)
            == ConnectionAccess(namespace: KeyNamespace("alice"), rights: [.read, .write]))
        // A name that cannot be a namespace, or no name at all, passes to the next line.
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2001, gid: 50), userName: names)?.namespace?.name == "fallback")
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2002, gid: 50), userName: names)?.namespace?.name == "fallback")
    }

    @Test func unmatchedPeersAreRefusedExceptRootAndTheDaemonsUser() throws {
        let rules = try parse("uid 2001 web read")
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 2002, gid: 2002)) == nil)
        let whole = ConnectionAccess(namespace: nil, rights: [.read, .write, .admin])
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 0, gid: 0)) == whole)
        #expect(rules.access(for: PeerCredentials(pid: 1, uid: 1000, gid: 1000)) == whole)
        // A line naming them comes first.
        let narrowed = try parse("uid 0 web read")
        #expect(narrowed.access(for: PeerCredentials(pid: 1, uid: 0, gid: 0)) == ConnectionAccess(namespace: Self.web, rights: [.read]))
    }

    @Test func namespaceKeysAreUnambiguous() {
        #expect(KeyNamespace("a.b-c_9") != nil)
        #expect(KeyNamespace("") == nil)
        #expect(KeyNamespace("a b") == nil)
        #expect(KeyNamespace("a\u{1F}b") == nil)
        #expect(KeyNamespace(String(repeating: "n", count: 65)) == nil)
        // ("a", "b\u{1F}c") and ("a\u{1F}b", "c") cannot collide: the second is no namespace.
        let stored = KeyNamespace.cacheKey("b\u{1F}c", in: KeyNamespace("a"))
        #expect(Array(stored.utf8) == Array("a\u{1F}b\u{1F}c".utf8))
        #expect(KeyNamespace("a")!.wireKey(stored) == "b\u{1F}c")
        #expect(KeyNamespace.cacheKey("k", in: nil) == "k")
    }
}
