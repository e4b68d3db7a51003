// Output written by hand into byte buffers, for listings at header-read speed: JSON strings escaped as
// JSONSerialization escapes them, UTC and local times without a formatter per call, and `StreamWriter`,
// which gathers a listing into 64 KiB writes.

import Foundation
import Glibc
import Synchronization

/// JSON text written by hand: strings escaped as JSONSerialization escapes them (without escaping `/`).
enum JSONText {
    static func string(_ text: String) -> String {
        var bytes: [UInt8] = []
        append(text, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` quoted and escaped; bytes that need no escape (all of most keys) are copied as is.
    static func append(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case 0x0A: out.append(contentsOf: #"\n"#.utf8)
                case 0x0D: out.append(contentsOf: #"\r"#.utf8)
                case 0x09: out.append(contentsOf: #"\t"#.utf8)
                case 0x08: out.append(contentsOf: #"\b"#.utf8)
                case 0x0C: out.append(contentsOf: #"\f"#.utf8)
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 0xF)])
                default: out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// `2026-11-30T12:34:56.789Z` (what `Format.iso` prints) without a formatter per call.
enum UTCTime {
    static func iso(_ date: Date) -> String {
        var bytes: [UInt8] = []
        append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func append(_ date: Date, to out: inout [UInt8]) {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())  // as ISO8601DateFormatter rounds
        var seconds = time_t(milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000)
        let millis = Int(milliseconds - Int64(seconds) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        appendCalendar(parts, dateSeparator: UInt8(ascii: "T"), to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(millis, 3, to: &out)
        out.append(UInt8(ascii: "Z"))
    }
}

/// `2026-11-30 12:34:56` in local time (what `Format.local` prints) without a formatter per call.
enum LocalTime {
    static func text(_ date: Date) -> String {
        var seconds = time_t(Int64(date.timeIntervalSince1970.rounded(.down)))
        var parts = tm()
        localtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        appendCalendar(parts, dateSeparator: UInt8(ascii: " "), to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}

private func appendCalendar(_ parts: tm, dateSeparator: UInt8, to out: inout [UInt8]) {
    appendDigits(Int(parts.tm_year) + 1900, 4, to: &out)
    out.append(UInt8(ascii: "-"))
    appendDigits(Int(parts.tm_mon) + 1, 2, to: &out)
    out.append(UInt8(ascii: "-"))
    appendDigits(Int(parts.tm_mday), 2, to: &out)
    out.append(dateSeparator)
    appendDigits(Int(parts.tm_hour), 2, to: &out)
    out.append(UInt8(ascii: ":"))
    appendDigits(Int(parts.tm_min), 2, to: &out)
    out.append(UInt8(ascii: ":"))
    appendDigits(Int(parts.tm_sec), 2, to: &out)
}

/// `value` in decimal, zero-padded to `width` digits (more when it has more).
private func appendDigits(_ value: Int, _ width: Int, to out: inout [UInt8]) {
    let digits = Array(String(value).utf8)
    if digits.count < width { out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width - digits.count)) }
    out.append(contentsOf: digits)
}

/// Output gathered into 64 KiB writes; `failed` once the reader went away (EPIPE).
final class StreamWriter: Sendable {
    private let state = Mutex<(buffer: [UInt8], failed: Bool)>(([], false))
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    var failed: Bool { state.withLock { $0.failed } }

    func append(_ text: String) {
        append { $0.append(contentsOf: text.utf8) }
    }

    /// Lets `body` write into the buffer directly.
    func append(_ body: (inout [UInt8]) -> Void) {
        let full = state.withLock { state -> Bool in
            body(&state.buffer)
            return state.buffer.count >= 64 * 1024
        }
        if full { flush() }
    }

    func flush() {
        state.withLock { state in
            guard !state.buffer.isEmpty, !state.failed else { return }
            if !state.buffer.withUnsafeBytes({ Output.write($0, to: fd) }) { state.failed = true }
            state.buffer.removeAll(keepingCapacity: true)
        }
    }
}
