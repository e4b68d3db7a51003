// Output formatting for `yashima`: writing whole buffers to a descriptor, one-line JSON documents
// (sorted keys, for scripts), human sizes, durations and dates, text tables, and printable forms of key
// text (which may hold NUL or control characters). No command logic here.

import Foundation
import Glibc

enum Output {
    /// Writes all of `bytes` to `fd` (retrying short writes and EINTR, waiting when it is non-blocking).
    /// Returns false when the descriptor refuses (EPIPE, a closed pipe).
    @discardableResult
    static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) -> Bool {
        guard var base = bytes.baseAddress else { return true }
        var remaining = bytes.count
        while remaining > 0 {
            let written = Glibc.write(fd, base, min(remaining, 1 << 30))
            if written > 0 {
                base += written
                remaining -= written
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && errno == EAGAIN {
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 1000)
            } else {
                return false
            }
        }
        return true
    }

    @discardableResult
    static func write(_ data: Data, to fd: Int32) -> Bool {
        var ok = true
        for region in data.regions where ok {
            ok = region.withUnsafeBytes { write($0, to: fd) }
        }
        return ok
    }

    static func out(_ text: String) {
        var text = text
        text.withUTF8 { _ = write(UnsafeRawBufferPointer($0), to: STDOUT_FILENO) }
    }

    static func line(_ text: String) { out(text + "\n") }

    static func error(_ text: String, terminator: Bool = true) {
        var text = terminator ? text + "\n" : text
        text.withUTF8 { _ = write(UnsafeRawBufferPointer($0), to: STDERR_FILENO) }
    }

    /// Prints `object` as one line of JSON with sorted keys.
    static func json(_ object: [String: Any]) {
        write(jsonLine(object), to: STDOUT_FILENO)
    }

    /// `object` as one line of JSON with sorted keys, newline included.
    static func jsonLine(_ object: [String: Any]) -> Data {
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
            ?? Data("{}".utf8)
        return data + Data("\n".utf8)
    }

    static var standardErrorIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

// MARK: Formatting

enum Format {
    /// `512 B`, `4.0 KiB`, `1.5 MiB`, `12.3 GiB`.
    static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: value < 10 ? "%.1f %@" : "%.0f %@", value, units[unit])
    }

    /// `850 µs`, `12.3 ms`, `2.31 s`, `4 min 10 s`, `3 h 5 min`, `2 d 4 h`.
    static func seconds(_ seconds: Double) -> String {
        if seconds < 0.001 { return String(format: "%.0f µs", seconds * 1e6) }
        if seconds < 1 { return String(format: "%.1f ms", seconds * 1e3) }
        if seconds < 60 { return String(format: "%.2f s", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return "\(whole / 60) min \(whole % 60) s" }
        if whole < 86_400 { return "\(whole / 3600) h \(whole % 3600 / 60) min" }
        return "\(whole / 86_400) d \(whole % 86_400 / 3600) h"
    }

    static func seconds(_ duration: Duration) -> String {
        seconds(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// ISO 8601 in UTC with milliseconds, for JSON: `2026-11-30T12:34:56.789Z`.
    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// Local time for people: `2026-11-30 12:34:56`.
    static func local(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }

    /// `3 h ago`, `in 2 d`.
    static func relative(_ date: Date, now: Date = Date()) -> String {
        let delta = now.timeIntervalSince(date)
        let text = seconds(abs(delta)).replacingOccurrences(of: #"\.\d+ s$"#, with: " s", options: .regularExpression)
        return delta >= 0 ? "\(text) ago" : "in \(text)"
    }

    /// Key text made printable on one line: control characters (NUL included) as `\0`, `\t`, `\xNN`.
    static func printable(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\0": result += "\\0"
            case "\t": result += "\\t"
            case "\n": result += "\\n"
            case "\\": result += "\\\\"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += String(format: "\\x%02x", scalar.value)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    /// Left-aligned columns separated by two spaces (the last column is not padded).
    static func table(_ rows: [[String]]) -> String {
        guard let columns = rows.map(\.count).max(), columns > 0 else { return "" }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (index, cell) in row.enumerated() where index < columns - 1 {
                widths[index] = max(widths[index], cell.count)
            }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// `1 entry`, `2 entries`.
    static func count(_ value: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(value) \(value == 1 ? singular : (plural ?? singular + "s"))"
    }
}
