// A method name resolved once per request, when the request is parsed: every later step
// (the transport's checks, the memory answer, the handler, per-method latencies) reads
// the resolved line instead of hashing the name again.

/// A request's method, resolved: its line of the table, its memory answer if it has
/// one, and its position in the table (`Dispatcher.methodNames`).
///
/// Threading: immutable; any thread. Made once, for every line of the table, in
/// `byName`.
public final class MethodRoute: Sendable {
    let spec: MethodSpec
    /// The synchronous answer from memory (`Dispatcher.memoryAnswers`), if the method has one.
    let memoryAnswer: Dispatcher.MemoryAnswerLine?
    /// The direct write (`Dispatcher.directWrites`), if the method has one.
    let directWrite: Dispatcher.DirectWriteLine?
    /// The method's position in `Dispatcher.methodNames`.
    public let index: Int

    public var flags: MethodFlags { spec.flags }

    private init(
        spec: MethodSpec, memoryAnswer: Dispatcher.MemoryAnswerLine?, directWrite: Dispatcher.DirectWriteLine?, index: Int
    ) {
        self.spec = spec
        self.memoryAnswer = memoryAnswer
        self.directWrite = directWrite
        self.index = index
    }

    /// The position of `name` in `Dispatcher.methodNames`; nil for a name the table lacks.
    public static func index(of name: String) -> Int? { byName[name]?.index }

    /// Every line of the table by name; checked once, when first used: no name twice, a
    /// memory answer only for a `fast` method that is not a debug method, a direct write
    /// only for a `write` method.
    static let byName: [String: MethodRoute] = {
        var answers: [String: Dispatcher.MemoryAnswerLine] = [:]
        for line in Dispatcher.memoryAnswers { answers[line.name] = line }
        var directs: [String: Dispatcher.DirectWriteLine] = [:]
        for line in Dispatcher.directWrites { directs[line.name] = line }
        var routes: [String: MethodRoute] = [:]
        for (index, spec) in Dispatcher.methodTable.enumerated() {
            precondition(routes[spec.name] == nil, "method table: \(spec.name) twice")
            let answer = answers.removeValue(forKey: spec.name)
            if answer != nil {
                precondition(spec.flags.contains(.fast) && !spec.flags.contains(.debug),
                             "memory answers: \(spec.name) is not a fast method of the table")
            }
            let direct = directs.removeValue(forKey: spec.name)
            if direct != nil {
                precondition(spec.flags.contains(.write), "direct writes: \(spec.name) is not a write method of the table")
            }
            routes[spec.name] = MethodRoute(spec: spec, memoryAnswer: answer, directWrite: direct, index: index)
        }
        precondition(answers.isEmpty, "memory answers: \(answers.keys.sorted()) not in the method table")
        precondition(directs.isEmpty, "direct writes: \(directs.keys.sorted()) not in the method table")
        return routes
    }()

    /// The lines of the table in its order, and their names, for `named(_:)`.
    private static let inOrder: [MethodRoute] = byName.values.sorted { $0.index < $1.index }
    private static let names = ByteNameTable(inOrder.map(\.spec.name))

    /// The line whose name is `name`'s bytes, or nil: what `byName` answers, found by
    /// comparing the few names of the same length in place rather than hashing a `String`
    /// (the request path looks a method up once per request).
    public static func named(_ name: UnsafeRawBufferPointer) -> MethodRoute? {
        names.index(of: name).map { inOrder[$0] }
    }
}
