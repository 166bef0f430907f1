// Rules of the code base that a reader would otherwise check by hand: comments in Sources/
// state contracts and reasons (figures live in Benchmarks/RESULTS.md); there is one lock
// idiom; and the targets of Package.swift depend only on those listed before them.

import Foundation
import Testing

@Suite struct SourceRulesTests {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// What a measurement in a comment looks like: a unit of time too small to be a
    /// contract, a rate per byte, an A/B or interleaved run, the word itself, and a
    /// before -> after pair of numbers.
    static let figurePatterns = [
        #"µs"#, #"\bns a byte\b"#, #"\d ?ns\b"#, #"\binterleaved\b"#, #"\bA/B\b"#, #"\b[Mm]easured\b"#,
        #"\d[\d.,]*\s*[%A-Za-zµ/]*\s*(->|→)\s*[\d.,]*\d"#,
    ]

    /// The comment text of each line of a Swift or C source: full-line comments and
    /// trailing `//` comments, without code spans in backticks or the lines of a fenced
    /// example (which show output, not claims).
    static func comments(_ text: String) -> [(line: Int, text: String)] {
        var result: [(Int, String)] = []
        var inFence = false
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            var comment: Substring?
            if trimmed.hasPrefix("//") || trimmed.hasPrefix("*") || trimmed.hasPrefix("/*") {
                comment = trimmed
            } else if let range = line.range(of: " // "),
                      line[..<range.lowerBound].filter({ $0 == "\"" }).count % 2 == 0 {
                comment = line[range.upperBound...]
            }
            guard let comment else { continue }
            let body = comment.drop { $0 == "/" || $0 == "*" || $0 == " " }
            if body.hasPrefix("```") {
                inFence.toggle()
                continue
            }
            if inFence { continue }
            let withoutCode = body.replacing(#/`[^`]*`/#, with: "")
            result.append((index + 1, String(withoutCode)))
        }
        return result
    }

    /// Comment lines in `Sources/` that look like a measurement.
    static func figuresInComments() throws -> [String] {
        let sources = root.appendingPathComponent("Sources")
        let patterns = try figurePatterns.map { try Regex($0) }
        var found: [String] = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard ["swift", "c", "h"].contains(url.pathExtension) else { continue }
            let path = String(url.path.dropFirst(root.path.count + 1))
            for (line, text) in comments(try String(contentsOf: url, encoding: .utf8))
            where patterns.contains(where: { text.contains($0) }) {
                found.append("\(path):\(line): \(text)")
            }
        }
        return found.sorted()
    }

    @Test func noCommentInSourcesHoldsAMeasurement() throws {
        let found = try Self.figuresInComments()
        #expect(found.isEmpty, "figures belong in Benchmarks/RESULTS.md:\n\(found.joined(separator: "\n"))")
    }

    /// Every section of Benchmarks/RESULTS.md that a comment in `Sources/` names
    /// (`Benchmarks/RESULTS.md, "Heading"`, possibly wrapped over lines) exists there: a
    /// comment never points at a figure the repository does not hold.
    @Test func everyResultsSectionACommentNamesExists() throws {
        let results = try String(contentsOf: Self.root.appendingPathComponent("Benchmarks/RESULTS.md"), encoding: .utf8)
        let headings = results.split(separator: "\n").filter { $0.hasPrefix("#") }
            .map { $0.drop { $0 == "#" || $0 == " " } }
        let sources = Self.root.appendingPathComponent("Sources")
        var missing: [String] = []
        var cited = 0
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)
        while let url = files?.nextObject() as? URL {
            guard ["swift", "c", "h"].contains(url.pathExtension) else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            // The comment lines joined, so that a name wrapped over two lines reads whole.
            let joined = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.drop { $0 == " " } }
                .filter { $0.hasPrefix("//") }
                .map { $0.drop { $0 == "/" }.drop { $0 == " " } }
                .joined(separator: " ")
            for match in joined.matches(of: #/RESULTS\.md, "([^"]+)"/#) {
                cited += 1
                let name = match.output.1
                if !headings.contains(where: { $0.hasPrefix(name) }) {
                    missing.append("\(url.lastPathComponent): \(name)")
                }
            }
        }
        #expect(cited > 0)
        #expect(missing.isEmpty, "sections named in comments but not in Benchmarks/RESULTS.md: \(missing)")
    }

    /// The check itself: it sees each kind of figure, and not what only looks like one.
    @Test func theCheckTellsFiguresFromContracts() throws {
        let patterns = try Self.figurePatterns.map { try Regex($0) }
        func hits(_ text: String) -> [Int] {
            Self.comments(text).filter { comment in patterns.contains { comment.text.contains($0) } }.map(\.line)
        }
        #expect(hits("""
            // a read took 29.3 µs
            /// jansson parses about 15 ns a byte
            let x = 1 // 42 -> 29 per set
            // Measured side by side
            //   run interleaved, A/B
             * 3.95 → 3.37 in a C block comment
            // 22k -> 33k sets/s
            """) == [1, 2, 3, 4, 5, 6, 7])
        #expect(hits("""
            /// Formats `62µs`, `600` → `10m`.
            /// ```
            ///  latency    p50 62µs
            /// ```
            let url = "redis://h" // the scheme
            // one key -> one file
            // an error line never lands in the middle of a value
            """) == [])
    }

    // MARK: One lock idiom

    /// Locks other than `Locked` in Swift code of Sources/ and Tests/.
    @Test func everyLockIsLocked() throws {
        let otherLocks = try Regex(#"\bNSLock\b|\bNSRecursiveLock\b|\bMutex<|\bos_unfair_lock\b|\bpthread_mutex_lock\b"#)
        var found: [String] = []
        for folder in ["Sources", "Tests"] {
            let files = FileManager.default.enumerator(at: Self.root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            while let url = files?.nextObject() as? URL {
                guard url.pathExtension == "swift" else { continue }
                let path = String(url.path.dropFirst(Self.root.path.count + 1))
                // The lock itself, and this file's pattern.
                guard path != "Sources/HalcyonSupport/Locked.swift", url.lastPathComponent != "SourceRulesTests.swift" else { continue }
                let text = try String(contentsOf: url, encoding: .utf8)
                for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where !line.drop(while: { $0 == " " }).hasPrefix("//") && line.contains(otherLocks) {
                    found.append("\(path):\(index + 1): \(line.trimmingCharacters(in: .whitespaces))")
                }
            }
        }
        #expect(found.isEmpty, "use Locked (Sources/HalcyonSupport/Locked.swift):\n\(found.joined(separator: "\n"))")
    }

    // MARK: Layers

    /// The modules Package.swift's header lists, in its order.
    static func listedLayers(_ manifest: String) throws -> [String] {
        let entry = try Regex(#"^//   ([A-Za-z][\w-]*(?:, [A-Za-z][\w-]*)*)\s{2,}\S"#)
        var names: [String] = []
        var inList = false
        for line in manifest.split(separator: "\n") {
            if line.contains("each uses only those listed before it") {
                inList = true
                continue
            }
            guard inList, line.hasPrefix("//") else {
                if inList { break } else { continue }
            }
            if let match = try entry.firstMatch(in: String(line)), let group = match.output[1].substring {
                names += group.split(separator: ", ").map(String.init)
            }
        }
        return names
    }

    /// Each target of `targets:` in order, with the targets of the package it names as
    /// dependencies (products of other packages left out).
    static func targets(_ manifest: String) throws -> [(name: String, dependencies: [String])] {
        let start = try Regex(#"\.(?:target|executableTarget|systemLibrary|testTarget)\(\s*name: "([^"]+)""#)
        let product = try Regex(#"\.product\([^)]*\)"#)
        let quoted = try Regex(#""([^"]+)""#)
        let matches = manifest.matches(of: start)
        return matches.enumerated().map { index, match in
            let end = index + 1 < matches.count ? matches[index + 1].range.lowerBound : manifest.endIndex
            let body = manifest[match.range.upperBound..<end]
            var dependencies: [String] = []
            if let open = body.range(of: "dependencies: [") {
                let list = body[open.upperBound...].prefix { $0 != "]" }.replacing(product, with: "")
                dependencies = list.matches(of: quoted).compactMap { $0.output[1].substring.map(String.init) }
            }
            return (String(match.output[1].substring ?? ""), dependencies)
        }
    }

    /// The header's statement holds: the production targets come in the listed order, and
    /// each depends only on targets listed before it.
    @Test func targetsUseOnlyTheLayersListedBeforeThem() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let layers = try Self.listedLayers(manifest)
        #expect(layers.count >= 10, "\(layers)")
        let targets = try Self.targets(manifest)
        #expect(targets.map(\.name).filter(layers.contains) == layers)
        var problems: [String] = []
        for target in targets {
            guard let position = layers.firstIndex(of: target.name) else { continue }
            for dependency in target.dependencies where !layers[..<position].contains(dependency) {
                problems.append("\(target.name) uses \(dependency), not listed before it")
            }
        }
        #expect(problems.isEmpty, "\(problems)")
    }
}
