// The key of a `yashima run` command: namespace (default `run`); identity = the command's argv joined with
// NUL (argv words cannot hold NUL, so the join is unambiguous), plus a digest of the exact argv bytes when
// a word is not valid UTF-8; a variant per `--input` (SHA-256 of its contents, the file mapped rather
// than read into memory), per `--key`, per `--env` (its value, or unset), the working directory with
// `--cwd`, and the `--output` paths; and the version of the stored container.

import Foundation
import Glibc
@_spi(Operator) import YashimaShared

enum RunKey {
    /// Bumped when what `yashima run` stores, or how its key is made, changes.
    static let version = 1

    /// Builds the key; a missing or unreadable `--input` is bad input.
    /// - Parameters:
    ///   - argvAddresses: The command's argv words (C strings of the process's argv).
    static func make(
        namespace: String, argvAddresses: [UInt], inputs: [String], keys: [String], environmentNames: [String],
        includeWorkingDirectory: Bool, outputs: [String]
    ) throws -> CacheKey {
        var words: [String] = []
        var exact = true
        var raw: [UInt8] = []
        for (index, address) in argvAddresses.enumerated() {
            let pointer = UnsafePointer<CChar>(bitPattern: address)!
            let bytes = Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map { UInt8(bitPattern: $0) }
            if index > 0 { raw.append(0) }
            raw += bytes
            if let word = String(validating: bytes, as: UTF8.self) {
                words.append(word)
            } else {
                words.append(String(decoding: bytes, as: UTF8.self))
                exact = false
            }
        }
        var key = CacheKey(namespace: namespace, identity: words.joined(separator: "\0"))
        if !exact { key = key.variant("argv-bytes", CacheKey.digest(of: raw)) }
        var seenInputs: Set<String> = []
        for input in inputs where seenInputs.insert(input).inserted {
            key = key.variant("input:" + input, try digest(ofFile: input))
        }
        for (index, text) in keys.enumerated() {
            key = key.variant("key:\(index + 1)", text)
        }
        for name in Set(environmentNames).sorted() {
            let value: String
            if let pointer = getenv(name) {
                let bytes = Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map {
                    UInt8(bitPattern: $0)
                }
                value =
                    String(validating: bytes, as: UTF8.self).map { "=" + $0 } ?? "bytes:" + CacheKey.digest(of: bytes)
            } else {
                value = "unset"
            }
            key = key.variant("env:" + name, value)
        }
        if includeWorkingDirectory {
            key = key.variant("cwd", FileManager.default.currentDirectoryPath)
        }
        if !outputs.isEmpty {
            key = key.variant("outputs", outputs.joined(separator: "\0"))
        }
        return key.version("yashima-run", version)
    }

    /// The SHA-256 of a file's contents, the file mapped (its pages are read once, never copied).
    static func digest(ofFile path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = errno == ENOENT ? "does not exist" : "cannot be read (\(String(cString: strerror(errno))))"
            throw CommandFailure.usage("--input \(path) \(reason)")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw CommandFailure.usage("--input \(path) is not a regular file")
        }
        let contents: Data
        do {
            contents = try mapFile(fd)
        } catch let failure as CommandFailure {
            throw CommandFailure.usage("--input \(path): \(failure.message)")
        }
        return CacheKey.digest(of: contents)
    }
}
