// Keeps Docs/PROTOCOL.md honest: every example exchange in it is sent to a real halcyond,
// and each reply must have the shape and the values the doc shows.
//
// The doc's marker format (described at the top of the doc itself): a fenced block opened with
// ```wire is run; inside it, `→ ` lines are sent verbatim and `← ` lines are the replies
// expected after them. Blocks with any other fence (```text) are illustrations: not run,
// but their `←` lines must be JSON-RPC errors with a known reason. A string value
// "<time>", "<int>", "<number>", "<string>" or "<any>" in a `←` line stands for a value
// that varies from run to run.

import Foundation
import HalcyonJSON
import HalcyonRPC
import Testing

/// One step of a `wire` block: a line to send, or a group of replies to read.
struct DocStep {
    enum Kind {
        /// A request line, sent exactly as written.
        case send(String)
        /// Replies expected next, in any order among themselves (matched by `id`).
        case expect([(text: String, value: JSONValue)])
    }
    var kind: Kind
    /// The doc's line number (1-based) of the step's first line, for failure messages.
    var line: Int
}

/// The runnable examples of a markdown document.
///
/// Threading: a value; build and read it on any one thread.
struct DocExamples {
    var steps: [DocStep] = []
    /// Problems with the doc itself (a malformed `←` line, text inside a `wire` block).
    var problems: [String] = []
    /// The `←` lines of illustration (```text) blocks, which cannot be run but must still
    /// be well-formed replies.
    var illustrations: [(line: Int, value: JSONValue)] = []

    init(markdown: String) {
        var inFence = false
        var runnable = false
        for (index, rawLine) in markdown.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(rawLine)
            let number = index + 1
            if line.hasPrefix("```") {
                if inFence {
                    inFence = false
                    runnable = false
                } else {
                    inFence = true
                    runnable = line.dropFirst(3).trimmingCharacters(in: .whitespaces) == "wire"
                }
                continue
            }
            guard runnable else {
                if inFence, line.hasPrefix("← ") {
                    switch JSONValue.parse(String(line.dropFirst(2))) {
                    case .success(let value): illustrations.append((number, value))
                    case .failure: problems.append("line \(number): an illustrated reply is not JSON")
                    }
                }
                continue
            }
            if line.hasPrefix("→ ") {
                steps.append(DocStep(kind: .send(String(line.dropFirst(2))), line: number))
            } else if line.hasPrefix("← ") {
                let text = String(line.dropFirst(2))
                guard case .success(let value) = JSONValue.parse(text) else {
                    problems.append("line \(number): the expected reply is not JSON: \(text)")
                    continue
                }
                if case .expect(var group)? = steps.last?.kind {
                    group.append((text, value))
                    steps[steps.count - 1].kind = .expect(group)
                } else {
                    steps.append(DocStep(kind: .expect([(text, value)]), line: number))
                }
            } else if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                problems.append("line \(number): a wire block holds only → and ← lines: \(line)")
            }
        }
        if inFence { problems.append("the document ends inside a fenced block") }
    }

    /// The methods the `→` lines call (batch elements included).
    var methodsSent: Set<String> {
        var methods: Set<String> = []
        for case .send(let text) in steps.map(\.kind) {
            guard case .success(let value) = JSONValue.parse(text) else { continue }
            for element in value.array ?? [value] {
                if let method = element["method"]?.string { methods.insert(method) }
            }
        }
        return methods
    }

    /// The error codes the `←` lines show (batch elements included).
    var errorCodesShown: Set<Int64> {
        var codes: Set<Int64> = []
        for case .expect(let group) in steps.map(\.kind) {
            for (_, value) in group {
                for element in value.array ?? [value] {
                    if let code = element["error"]?["code"]?.int64 { codes.insert(code) }
                }
            }
        }
        return codes
    }
}

/// Compares a reply with the doc's expectation: the same member names at every level, the
/// same values, except where the doc holds a placeholder. Returns what differs.
func shapeDifferences(expected: JSONValue, actual: JSONValue, at path: String = "$") -> [String] {
    if expected.kind == .string, let text = expected.string, text.hasPrefix("<"), text.hasSuffix(">") {
        let ok: Bool
        switch text {
        // Instants are whole Unix seconds (Docs/PROTOCOL.md §5: rounded up), or null for "never";
        // a real instant, never one before 1970 (a placeholder date leaking onto the wire).
        case "<time>": ok = (actual.kind == .integer && (actual.int64 ?? -1) >= 0) || actual.kind == .null
        case "<int>": ok = actual.kind == .integer
        case "<number>": ok = actual.kind == .integer || actual.kind == .real
        case "<string>": ok = actual.kind == .string
        case "<any>": ok = true
        default: return ["\(path): unknown placeholder \(text)"]
        }
        return ok ? [] : ["\(path): \(actual.compactText) is not a \(text)"]
    }
    guard expected.kind == actual.kind else {
        return ["\(path): expected \(expected.compactText), got \(actual.compactText)"]
    }
    switch expected.kind {
    case .object:
        let wantKeys = expected.keys
        let gotKeys = actual.keys
        if wantKeys != gotKeys {
            return ["\(path): members \(gotKeys), the doc shows \(wantKeys)"]
        }
        return wantKeys.flatMap { key in
            shapeDifferences(expected: expected[key]!, actual: actual[key]!, at: "\(path).\(key)")
        }
    case .array:
        let want = expected.array ?? []
        let got = actual.array ?? []
        guard want.count == got.count else {
            return ["\(path): \(got.count) elements, the doc shows \(want.count)"]
        }
        return zip(want, got).enumerated().flatMap { i, pair in
            shapeDifferences(expected: pair.0, actual: pair.1, at: "\(path)[\(i)]")
        }
    default:
        return expected == actual ? [] : ["\(path): expected \(expected.compactText), got \(actual.compactText)"]
    }
}

@Suite("Protocol doc examples", .timeLimit(.minutes(1)))
struct ProtocolDocTests {
    static let docURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Docs/PROTOCOL.md")

    static func examples() throws -> DocExamples {
        DocExamples(markdown: try String(contentsOf: docURL, encoding: .utf8))
    }

    /// The doc shows every method of the spec and every error a client can cause, in
    /// blocks that are run (not just illustrated).
    @Test func docCoversEveryMethodAndReachableError() throws {
        let doc = try Self.examples()
        #expect(doc.problems.isEmpty, "\(doc.problems)")
        let methods: Set<String> = [
            "cache.set", "cache.get", "cache.isCached", "cache.describe", "cache.touch", "cache.remove",
            "cache.clear", "cache.removeExpired", "cache.trim", "cache.totalSize", "cache.stats",
            "connection.configure", "server.ping", "server.info", "$/cancelRequest", "debug.sleep",
            "cache.add", "cache.incr", "cache.cas", "cache.getMany", "cache.setMany", "cache.keys",
            "cache.removePrefix", "cache.lease", "cache.releaseLease",
        ]
        #expect(methods.subtracting(doc.methodsSent).isEmpty, "not run: \(methods.subtracting(doc.methodsSent))")
        let codes: Set<Int64> = [-32700, -32600, -32601, -32602, -32800, -32004]
        #expect(codes.subtracting(doc.errorCodesShown).isEmpty, "not shown: \(codes.subtracting(doc.errorCodesShown))")
    }

    /// Every `data.reason` the code can produce is in the doc's error table (§3), so a new
    /// reason cannot ship undocumented. The free-standing reasons (made by factory
    /// functions rather than enums) are listed by hand.
    @Test func docNamesEveryErrorReason() throws {
        let markdown = try String(contentsOf: Self.docURL, encoding: .utf8)
        let table = markdown.components(separatedBy: "## 3. Errors").dropFirst().first?
            .components(separatedBy: "\n## ").first ?? ""
        var reasons = Set(JSONParseError.Reason.allCases.map(\.rawValue))
        reasons.formUnion(RPCError.InvalidRequestReason.allCases.map(\.rawValue))
        reasons.formUnion(RPCError.InvalidParamsReason.allCases.map(\.rawValue))
        // tooManyInFlight is declared but never sent: --max-in-flight is back-pressure.
        reasons.formUnion(RPCError.OverloadReason.allCases.map(\.rawValue).filter { $0 != "tooManyInFlight" })
        reasons.formUnion([
            "lineTooLong", "batchTooLarge", "methodNotFound", "debugMethodsDisabled", "internalError",
            "requestCancelled", "shuttingDown", "cannotEncode", "diskStorageIsNotReady",
            "cannotCreateCacheFile", "cannotSetCacheFileAttribute", "cannotRemoveCacheFile",
            "cannotLoadDataFromDisk", "peerNotAllowed", "notPermitted",
        ])
        let missing = reasons.filter { !table.contains("`\($0)`") }.sorted()
        #expect(missing.isEmpty, "not in the §3 table: \(missing)")

        // Illustrated error replies are JSON-RPC 2.0 errors with a reason the code knows.
        let doc = try Self.examples()
        #expect(!doc.illustrations.isEmpty)
        for (line, reply) in doc.illustrations {
            let error = reply["error"]
            #expect(reply["jsonrpc"]?.string == "2.0" && reply["id"] != nil, "Docs/PROTOCOL.md:\(line)")
            #expect(error?["code"]?.int64 != nil && error?["message"]?.string != nil, "Docs/PROTOCOL.md:\(line)")
            let reason = error?["data"]?["reason"]?.string ?? "(none)"
            #expect(reasons.contains(reason), "Docs/PROTOCOL.md:\(line): unknown reason \(reason)")
        }
    }

    /// Runs every `wire` block, in order, on one connection to a fresh daemon.
    @Test func everyExampleMatchesTheDaemon() throws {
        let doc = try Self.examples()
        try #require(doc.problems.isEmpty, "\(doc.problems)")
        try #require(!doc.steps.isEmpty)
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()

        for step in doc.steps {
            switch step.kind {
            case .send(let text):
                try client.send(text)
            case .expect(let group):
                var replies: [JSONValue] = []
                for _ in group {
                    guard let line = try client.readLine() else {
                        Issue.record("Docs/PROTOCOL.md:\(step.line): no reply (expected \(group.count))")
                        return
                    }
                    #expect(!line.contains("\n"))
                    replies.append(try JSONValue.parse(line).get())
                }
                for (offset, want) in group.enumerated() {
                    // Replies may leave in another order (spec §1): pair them by id.
                    let wantID = want.value.array == nil ? want.value["id"]?.compactText : nil
                    let index = replies.firstIndex {
                        ($0.array == nil ? $0["id"]?.compactText : nil) == wantID
                    } ?? 0
                    let got = replies.remove(at: index)
                    let differences = shapeDifferences(expected: want.value, actual: got)
                    #expect(
                        differences.isEmpty,
                        "Docs/PROTOCOL.md:\(step.line + offset)\n  doc:    \(want.text)\n  daemon: \(got.compactText)\n  \(differences.joined(separator: "\n  "))"
                    )
                }
            }
        }
        // Nothing unexpected is left on the wire (a notification is never answered).
        try client.send(#"{"jsonrpc":"2.0","id":"doc-end","method":"server.ping"}"#)
        let last = try client.readReply()
        #expect(last["id"]?.string == "doc-end", "an extra reply: \(last.compactText)")
    }

    /// The comparison itself: placeholders, member names, nested values.
    @Test func shapeComparison() throws {
        func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(text).get() }
        let doc = try parse(#"{"a":"<time>","b":{"c":[1,"<string>"]},"d":"<any>"}"#)
        #expect(shapeDifferences(expected: doc, actual: try parse(#"{"a":17,"b":{"c":[1,"x"]},"d":null}"#)).isEmpty)
        #expect(shapeDifferences(expected: doc, actual: try parse(#"{"a":null,"b":{"c":[1,""]},"d":[]}"#)).isEmpty)
        #expect(!shapeDifferences(expected: doc, actual: try parse(#"{"a":17.5,"b":{"c":[1,"x"]},"d":1}"#)).isEmpty)
        #expect(!shapeDifferences(expected: doc, actual: try parse(#"{"a":1,"b":{"c":[2,"x"]},"d":1}"#)).isEmpty)
        #expect(!shapeDifferences(expected: doc, actual: try parse(#"{"a":1,"b":{"c":[1,"x"]}}"#)).isEmpty)
        #expect(!shapeDifferences(expected: doc, actual: try parse(#"{"a":1,"b":{"c":[1,"x"],"e":0},"d":1}"#)).isEmpty)
        #expect(!shapeDifferences(expected: try parse("1"), actual: try parse("1.0")).isEmpty)
    }
}

/// Spec points the doc states in prose (§6 "One lifetime per entry", `referenceDate`),
/// checked against a real daemon with times relative to now.
@Suite("Protocol spec points", .timeLimit(.minutes(1)))
struct ProtocolDocSpecPointTests {
    private func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// The memory tier keeps exact instants; replies still show whole seconds, rounded up.
    @Test func memoryExpiriesAreWholeSecondsRoundedUp() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let before = now()
        let set = try client.result(
            "cache.set", #"{"key":"m","value":"v","toDisk":false,"memoryExpiration":{"seconds":10.25}}"#)
        let setAt = try #require(set["expiresAt"]?.int64, "\(set.compactText)")
        #expect(setAt >= before + 11 && setAt <= now() + 12)
        let got = try client.result("cache.get", #"{"key":"m","extendingExpiration":"none"}"#)
        #expect(got["cacheType"]?.string == "memory")
        #expect(got["expiresAt"]?.int64 == setAt, "\(got.compactText)")
        let described = try client.result("cache.describe", #"{"key":"m"}"#)
        #expect(described["expiresAt"]?.int64 == setAt, "\(described.compactText)")
        let lastAccess = try #require(described["lastAccessAt"]?.int64, "\(described.compactText)")
        #expect(lastAccess >= before - 1 && lastAccess <= now())
        let touched = try client.result("cache.touch", #"{"key":"m","memoryExpiration":{"seconds":5.5}}"#)
        #expect(touched["touched"]?.bool == true)
        let touchedAt = try #require(touched["expiresAt"]?.int64, "\(touched.compactText)")
        #expect(touchedAt >= before + 6 && touchedAt <= now() + 7)
    }

    /// One lifetime per entry: get and describe report it whichever tier answered;
    /// describe adds the memory copy's residency as `memoryExpiresAt`.
    @Test func readsReportTheEntrysLifetime() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let before = now()
        let set = try client.result("cache.set", #"{"key":"k","value":"v","expiration":{"days":1}}"#)
        let diskAt = try #require(set["expiresAt"]?.int64)
        #expect(diskAt >= before + 86_400 && diskAt <= now() + 86_401)
        // Memory answers with the lifetime, not its residency (the daemon's default 300 s).
        let memoryHit = try client.result("cache.get", #"{"key":"k","extendingExpiration":"none"}"#)
        #expect(memoryHit["cacheType"]?.string == "memory")
        #expect(memoryHit["expiresAt"]?.int64 == diskAt, "\(memoryHit.compactText)")
        let memoryDescribed = try client.result("cache.describe", #"{"key":"k"}"#)
        #expect(memoryDescribed["cacheType"]?.string == "memory")
        #expect(memoryDescribed["expiresAt"]?.int64 == diskAt)
        let residentUntil = try #require(memoryDescribed["memoryExpiresAt"]?.int64, "\(memoryDescribed.compactText)")
        #expect(residentUntil >= before + 300 && residentUntil <= now() + 301)
        // Disk: the same lifetime once the memory copy is gone, and no memoryExpiresAt.
        _ = try client.result("cache.remove", #"{"key":"k","fromDisk":false}"#)
        let diskDescribed = try client.result("cache.describe", #"{"key":"k"}"#)
        #expect(diskDescribed["cacheType"]?.string == "disk")
        #expect(diskDescribed["expiresAt"]?.int64 == diskAt, "\(diskDescribed.compactText)")
        #expect(diskDescribed["memoryExpiresAt"] == nil)
        let diskHit = try client.result("cache.get", #"{"key":"k","extendingExpiration":"none"}"#)
        #expect(diskHit["cacheType"]?.string == "disk")
        #expect(diskHit["expiresAt"]?.int64 == diskAt, "\(diskHit.compactText)")
    }

    /// referenceDate judges the lifetime in both tiers.
    @Test func referenceDateJudgesBothTiers() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"r","value":"v","expiration":{"seconds":100}}"#)
        let later = now() + 200
        for tier in ["memory", "disk"] {
            if tier == "disk" { _ = try client.result("cache.remove", #"{"key":"r","fromDisk":false}"#) }
            let atLater = try client.result("cache.isCached", #"{"key":"r","referenceDate":\#(later)}"#)
            #expect(atLater["cached"]?.bool == false, "\(tier): \(atLater.compactText)")
            let describedLater = try client.result("cache.describe", #"{"key":"r","referenceDate":\#(later)}"#)
            #expect(describedLater["found"]?.bool == false, "\(tier): \(describedLater.compactText)")
            let gotLater = try client.result("cache.get", #"{"key":"r","referenceDate":\#(later)}"#)
            #expect(gotLater["found"]?.bool == false, "\(tier): \(gotLater.compactText)")
            let atNow = try client.result("cache.isCached", #"{"key":"r","referenceDate":\#(now())}"#)
            #expect(atNow["cacheType"]?.string == tier, "\(atNow.compactText)")
        }
        // removeExpired at `later` removes it; the reads above deleted nothing.
        let removed = try client.result("cache.removeExpired", #"{"referenceDate":\#(later)}"#)
        #expect(removed["removed"]?.int64 == 1, "\(removed.compactText)")
    }

    /// -32002 and -32003 reach the wire with their reasons and errno names. Even as root,
    /// a directory where the cache file goes cannot be renamed over, and a symlink loop
    /// cannot be opened, so both are reproducible without permissions or a full disk.
    @Test func storageErrorsReachTheWire() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        let folder = try #require(try client.result("server.info")["cacheFolder"]?.string)
        let files = FileManager.default
        func regularFiles() throws -> Set<String> {
            Set(try files.contentsOfDirectory(atPath: folder).filter { name in
                var isDirectory: ObjCBool = false
                return files.fileExists(atPath: folder + "/" + name, isDirectory: &isDirectory) && !isDirectory.boolValue
            })
        }

        _ = try client.result("cache.set", #"{"key":"w","value":"v"}"#)
        _ = try client.result("cache.totalSize")  // writes the journaled value to its file
        let wFile = try #require(try regularFiles().first)
        try files.removeItem(atPath: folder + "/" + wFile)
        try files.createDirectory(atPath: folder + "/" + wFile + "/sub", withIntermediateDirectories: true)
        // A value of 1 MiB or more is written to its file before the reply (a smaller one
        // is acknowledged from the journal, and its file written behind).
        let large = String(repeating: "v", count: 1 << 20)
        let cannotWrite = try client.call("cache.set", #"{"key":"w","value":"\#(large)"}"#)
        #expect(cannotWrite["error"]?["code"]?.int64 == -32002, "\(cannotWrite.compactText)")
        #expect(cannotWrite["error"]?["data"]?["reason"]?.string == "cannotCreateCacheFile")
        #expect(cannotWrite["error"]?["data"]?["errnoName"]?.string == "EISDIR")

        let before = try regularFiles()
        _ = try client.result("cache.set", #"{"key":"r","value":"v"}"#)
        _ = try client.result("cache.totalSize")
        let rFile = try #require(try regularFiles().subtracting(before).first)
        _ = try client.result("cache.remove", #"{"key":"r","fromDisk":false}"#)
        let path = folder + "/" + rFile
        try files.removeItem(atPath: path)
        try files.createSymbolicLink(atPath: path, withDestinationPath: path)
        let cannotRead = try client.call("cache.get", #"{"key":"r"}"#)
        #expect(cannotRead["error"]?["code"]?.int64 == -32003, "\(cannotRead.compactText)")
        #expect(cannotRead["error"]?["data"]?["reason"]?.string == "cannotLoadDataFromDisk")
        #expect(cannotRead["error"]?["data"]?["errnoName"]?.string == "ELOOP")
    }

    /// cache.stats counts what the doc says it counts, per tier.
    @Test func statsCountersMove() throws {
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let client = try daemon.client()
        _ = try client.result("cache.set", #"{"key":"a","value":"12345"}"#)
        _ = try client.result("cache.get", #"{"key":"a"}"#)                      // memory hit
        _ = try client.result("cache.remove", #"{"key":"a","fromDisk":false}"#)  // a removal
        _ = try client.result("cache.get", #"{"key":"a"}"#)                      // memory miss, disk hit
        _ = try client.result("cache.get", #"{"key":"none"}"#)                   // memory miss, disk miss
        _ = try client.result("cache.removeExpired", #"{"memory":false,"referenceDate":4102444800}"#)
        let stats = try client.result("cache.stats")
        func n(_ path: String...) -> Int64? {
            var value: JSONValue? = stats
            for key in path { value = value?[key] }
            return value?.int64
        }
        #expect(n("memory", "hits") == 1, "\(stats.compactText)")
        #expect(n("memory", "misses") == 2, "\(stats.compactText)")
        #expect(n("disk", "hits") == 1, "\(stats.compactText)")
        #expect(n("disk", "misses") == 1, "\(stats.compactText)")
        #expect(n("sets") == 1 && n("removals") == 1, "\(stats.compactText)")
        #expect(n("disk", "expirations") == 1 && n("expirations") == 1, "\(stats.compactText)")
        #expect(n("disk", "entries") == 0 && n("disk", "bytes") == 0, "\(stats.compactText)")
        #expect(n("memory", "entries") == 1 && n("memory", "bytes") == 5, "\(stats.compactText)")
        // inFlight includes this very request; the previous replies may still be counted
        // until their writes complete, so only a lower bound is certain.
        #expect(n("connections") == 1 && (n("inFlight") ?? 0) >= 1, "\(stats.compactText)")
        #expect((n("uptime") ?? -1) >= 0)
    }

    /// Every member the daemon's `cache.stats` reply holds, at every level, is named in
    /// the prose of the doc's `cache.stats` section (the example's shape alone lists names
    /// without saying what they count), so a new counter cannot ship undocumented.
    @Test func everyStatsFieldIsDocumented() throws {
        let markdown = try String(contentsOf: ProtocolDocTests.docURL, encoding: .utf8)
        let section = markdown.components(separatedBy: "\n### cache.stats\n").dropFirst().first ?? ""
        let prose = section.components(separatedBy: "```wire").first ?? ""
        try #require(!prose.isEmpty, "no cache.stats section in Docs/PROTOCOL.md")
        let daemon = try DaemonProcess()
        defer { daemon.cleanUp() }
        let stats = try daemon.client().result("cache.stats")
        func names(_ value: JSONValue, _ path: String) -> [String] {
            value.keys.flatMap { key -> [String] in
                let member = value[key]!
                let dotted = path.isEmpty ? key : "\(path).\(key)"
                return [dotted] + (member.kind == .object ? names(member, dotted) : [])
            }
        }
        let all = names(stats, "")
        #expect(all.count > 40, "\(stats.compactText)")
        let missing = all.filter { !prose.contains("`\($0.split(separator: ".").last!)`") }
        #expect(missing.isEmpty, "cache.stats members not described in Docs/PROTOCOL.md: \(missing)")
    }
}
