// swift-tools-version: 6.0
import PackageDescription

// YASHIMA_DYNAMIC_CLI=1 links the `yashima` executable like any other (see its target): AddressSanitizer
// (the last step of .ci/run) aborts the static CoreFoundation on its own frees, before any code of ours.
let staticCLI = Context.environment["YASHIMA_DYNAMIC_CLI"] == nil

let package = Package(
    name: "YashimaShared",
    products: [
        .library(name: "YashimaShared", targets: ["YashimaShared"]),
        .executable(name: "yashima-stress", targets: ["yashima-stress"]),
        .executable(name: "yashima", targets: ["yashima"]),
    ],
    targets: [
        // The thin syscall layer: flock, open flags, mmap, renameat2, path walks, inotify, the SIGBUS guard,
        // shared-memory atomics.
        .target(name: "CFileLock"),
        // The remote tier's C pieces: socket shims (Redis, plain HTTP) and the dlopen'ed libcurl (https).
        .target(name: "CNetwork"),
        // Hashes with CPU instructions where the CPU has them: CRC32C (SSE4.2), SHA-256 (SHA-NI).
        .target(name: "CHashes"),
        // zlib from the system (Debian's zlib1g-dev); used by CompressedDataCodec.
        .systemLibrary(name: "CZlib"),
        .target(
            name: "YashimaShared",
            dependencies: ["CFileLock", "CNetwork", "CHashes", "CZlib"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Child processes on pipes with one READY/GO start barrier, for the stress runner, the benchmarks
        // and the tests (internal tooling: not a product).
        .target(
            name: "ChildProcesses",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "yashima-stress",
            dependencies: ["YashimaShared", "CFileLock", "ChildProcesses"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The command-line tool: memoizes shell commands (`yashima run`) and operates a storage directory.
        // Uses the library's public API and its `@_spi(Operator)` surface (Sources/YashimaShared/Operator).
        // All of it but `main` is this library, which the tests import and link.
        .target(
            name: "YashimaCommandLine",
            dependencies: ["YashimaShared", "CFileLock"],
            path: "Sources/yashima",
            exclude: ["Main"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // The `yashima` executable, linked with the Swift standard library, Foundation and Dispatch
        // statically and as a fixed-address (non-PIE) executable: a hit is a whole process, and binding
        // the toolchain's shared libraries, or relocating a position-independent 80 MB binary, cost more at
        // start-up than the hit itself. Only glibc, libstdc++, libgcc_s, zlib and libm stay dynamic. Linked
        // by lld: the default (gold) warns about the static Foundation's use of mktemp in every build.
        // Packages depending on this one by URL or path never build this target; the tests do not link it.
        .executableTarget(
            name: "yashima",
            dependencies: ["YashimaCommandLine"],
            path: "Sources/yashima/Main",
            swiftSettings: [.swiftLanguageMode(.v6)] + (staticCLI ? [.unsafeFlags(["-static-stdlib"])] : []),
            linkerSettings: staticCLI
                ? [.unsafeFlags(["-static-stdlib", "-use-ld=lld", "-Xclang-linker", "-no-pie"])] : []
        ),
        // The README's quick start, verbatim, and the guides (the DocC catalog's articles) as one program:
        // every sample is compiled from here, and ExamplesTests runs them (ReadmeSamplesTests keeps the
        // text of the README and of the guides in step).
        .executableTarget(
            name: "yashima-quickstart",
            dependencies: ["YashimaShared"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "yashima-examples",
            dependencies: ["YashimaShared"],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "YashimaSharedTests",
            dependencies: [
                "YashimaShared", "CFileLock", "CHashes", "ChildProcesses", "yashima-stress", "yashima-examples",
                "yashima-quickstart", "YashimaCommandLine",
            ],
            path: "Tests/YashimaSharedTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        // Yashima's public call shapes and behaviours, with `import YashimaShared` and nothing else: what an
        // app ported from Yashima sees.
        .testTarget(
            name: "YashimaCompatibilityTests",
            dependencies: ["YashimaShared"],
            path: "Tests/YashimaCompatibilityTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .testTarget(
            name: "StressTests",
            dependencies: ["YashimaShared", "ChildProcesses", "yashima-stress"],
            path: "StressTests",
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
