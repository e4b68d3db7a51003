// What bad-input, redaction and measurement tests ask of any value or call: every textual form a log
// could show, the typed error a call throws, and runs timed in nanoseconds.

import Testing

@testable import YashimaShared

/// `description`, `String(reflecting:)` and `dump` of each value: what a log could show of it.
func textualForms(_ values: Any...) -> [String] {
    values.flatMap { value -> [String] in
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), dumped]
    }
}

/// The error `body` throws, or nil when it returns.
func thrownError<Failure: Error>(_ body: () throws(Failure) -> Void) -> Failure? {
    do throws(Failure) {
        try body()
        return nil
    } catch {
        return error
    }
}

/// Expects each of `texts` to be refused by `failure` with an error whose text (`description` and
/// `String(reflecting:)`) holds none of `secrets`.
func expectRefusedQuietly<Failure: Error>(
    _ texts: [String], hiding secrets: [String], sourceLocation: SourceLocation = #_sourceLocation,
    _ failure: (String) -> Failure?
) {
    for text in texts {
        guard let error = failure(text) else {
            Issue.record("\(text) parsed", sourceLocation: sourceLocation)
            continue
        }
        let rendered = "\(error) \(String(reflecting: error))"
        for secret in secrets { #expect(!rendered.contains(secret), "\(rendered)", sourceLocation: sourceLocation) }
    }
}

/// Times `count` runs of `body` after `warmUp` untimed ones: nanoseconds per run.
func timedRuns(_ count: Int, warmUp: Int, _ body: () async -> Void) async -> [Int64] {
    for _ in 0..<warmUp { await body() }
    var samples: [Int64] = []
    for _ in 0..<count {
        let start = Syscall.monotonicNanoseconds
        await body()
        samples.append(Syscall.monotonicNanoseconds - start)
    }
    return samples
}
