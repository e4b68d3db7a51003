// Temporary entry points until the runner, scenario workers and benchmarks land.

enum StressRunner {
    static func run(_ words: [String]) async throws -> Int32 { 0 }
}

enum ScenarioWorker {
    static func run(_ arguments: inout Arguments) async throws -> Int32 { 0 }
}
