// Draws the main benchmark results as a plain SVG chart (no dependencies): storage-hit latency by payload
// size for YashimaShared and the raw baselines, write latency against write-temp+rename, and the
// cross-process wait overhead. Bars are medians on a log scale; thin whiskers reach the p99.

import Foundation

enum BenchChart {
    /// One bar: a row's median, with its p99 as a whisker.
    private struct Bar {
        var label: String
        var color: String
        var row: BenchRow?
    }

    private static let palette = (raw: "#9aa5b1", rawDark: "#52606d", cache: "#d64545", cacheLight: "#f29b9b")

    /// - Parameter caption: a line under the chart (machine, date, mode).
    static func svg(_ rows: [BenchRow], caption: String = "") -> String {
        func row(_ name: String) -> BenchRow? { rows.first { $0.name == name && $0.medianNs.isFinite } }
        let width = 920.0
        var body = ""
        var top = 20.0

        // Panel 1: storage hits by payload size.
        let sizes = ["4 KiB", "64 KiB", "1 MiB", "16 MiB"]
        let hitSeries: [(String, String, String)] = [
            ("raw open+read(2)+close", "raw open+read(2)", palette.raw),
            ("raw open+mmap+touch+munmap", "raw open+mmap+touch", palette.rawDark),
            ("YCache storage hit +touch", "YashimaShared hit (+touch)", palette.cache),
            ("YCache first storage hit (CRC)", "YashimaShared first hit of a file (CRC)", palette.cacheLight),
        ]
        body += panel(
            title: "Storage hit latency by payload size (single process, page cache warm)", top: top, width: width,
            groups: sizes.map { size in
                (size, hitSeries.map { Bar(label: $0.1, color: $0.2, row: row("\($0.0) \(size)")) })
            },
            legend: hitSeries.map { ($0.1, $0.2) })
        top += 300

        // Panel 2: writes.
        let writeGroups: [(String, [Bar])] = [
            (
                "new 4 KiB",
                [
                    Bar(label: "raw", color: palette.raw, row: row("raw write-temp+rename 4 KiB")),
                    Bar(label: "cache", color: palette.cache, row: row("YCache generate+publish 4 KiB")),
                ]
            ),
            (
                "new 1 MiB",
                [
                    Bar(label: "raw", color: palette.raw, row: row("raw write-temp+rename 1 MiB")),
                    Bar(label: "cache", color: palette.cache, row: row("YCache generate+publish 1 MiB")),
                ]
            ),
            (
                "replacing 4 KiB",
                [
                    Bar(label: "raw", color: palette.raw, row: row("raw write-temp+rename over existing 4 KiB")),
                    Bar(label: "cache", color: palette.cache, row: row("YCache store replacing 4 KiB")),
                ]
            ),
        ]
        body += panel(
            title: "Write latency: raw write-temp+rename vs YashimaShared publish", top: top, width: width,
            groups: writeGroups,
            legend: [("raw write-temp+rename (no fsync)", palette.raw), ("YashimaShared", palette.cache)])
        top += 300

        // Panel 3: cross-process waits.
        let waitGroups: [(String, [Bar])] = [
            (
                "lock hand-off wake-up",
                [
                    Bar(label: "raw", color: palette.raw, row: row("raw flock hand-off")),
                    Bar(
                        label: "cache", color: palette.cache,
                        row: row("YCache generator returns → waiting process returns")),
                ]
            ),
            (
                "8-process stampede: slowest − 200 ms",
                [
                    Bar(label: "cache", color: palette.cache, row: row("stampede slowest wall − 200 ms")),
                    Bar(
                        label: "cache", color: palette.cacheLight,
                        row: row("stampede slowest wall − 200 ms (incl. first open)")),
                ]
            ),
        ]
        body += panel(
            title: "Cross-process wait overhead", top: top, width: width, groups: waitGroups,
            legend: [
                ("bare flock hand-off between processes", palette.raw),
                ("YashimaShared (storage open before the miss)", palette.cache),
                ("stampede incl. each process's first open", palette.cacheLight),
            ])
        top += 300
        body += "<text x=\"70\" y=\"\(format(top - 8))\" font-size=\"11\" fill=\"#52606d\">\(escape(caption))</text>\n"
        top += 6

        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(top + 10))" viewBox="0 0 \(Int(width)) \(Int(top + 10))" font-family="sans-serif">
            <rect width="100%" height="100%" fill="white"/>
            \(body)
            </svg>

            """
    }

    /// One panel: grouped vertical bars on a log scale from 1 µs to 1 s, with p99 whiskers and labels.
    private static func panel(
        title: String, top: Double, width: Double, groups: [(String, [Bar])], legend: [(String, String)]
    ) -> String {
        let left = 70.0
        let right = width - 20
        let plotTop = top + 40
        let bottom = top + 230
        var out =
            "<text x=\"\(left)\" y=\"\(top + 22)\" font-size=\"15\" font-weight=\"bold\">\(escape(title))</text>\n"
        func y(_ ns: Double) -> Double {
            let clamped = min(max(ns, 1_000), 1_000_000_000)
            return bottom - (log10(clamped) - 3) / 6 * (bottom - plotTop)
        }
        for (exponent, label) in ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"].enumerated() {
            let lineY = format(y(pow(10, Double(exponent + 3))))
            out += "<line x1=\"\(left)\" x2=\"\(right)\" y1=\"\(lineY)\" y2=\"\(lineY)\" stroke=\"#e4e7eb\"/>"
            out +=
                "<text x=\"\(left - 8)\" y=\"\(format(Double(lineY)! + 4))\" text-anchor=\"end\" font-size=\"11\" fill=\"#3e4c59\">\(label)</text>\n"
        }
        out +=
            "<text x=\"16\" y=\"\(format((plotTop + bottom) / 2))\" font-size=\"11\" fill=\"#3e4c59\" transform=\"rotate(-90 16 \(format((plotTop + bottom) / 2)))\" text-anchor=\"middle\">median (bar), p99 (whisker), log scale</text>\n"
        let groupWidth = (right - left) / Double(max(1, groups.count))
        for (index, group) in groups.enumerated() {
            let x0 = left + Double(index) * groupWidth
            let slots = Double(max(1, group.1.count))
            let barWidth = min(60, (groupWidth - 40) / slots)
            let start = x0 + (groupWidth - barWidth * slots) / 2
            for (slot, bar) in group.1.enumerated() {
                let x = start + Double(slot) * barWidth
                guard let row = bar.row else { continue }  // not measured at this size
                let barTop = y(row.medianNs)
                out +=
                    "<rect x=\"\(format(x + 2))\" y=\"\(format(barTop))\" width=\"\(format(barWidth - 4))\" height=\"\(format(bottom - barTop))\" fill=\"\(bar.color)\"><title>\(escape(row.name)): median \(escape(formatNanoseconds(row.medianNs))), p99 \(escape(formatNanoseconds(row.p99Ns)))</title></rect>"
                if row.p99Ns.isFinite, row.p99Ns > row.medianNs {
                    let whiskerX = format(x + barWidth / 2)
                    out +=
                        "<line x1=\"\(whiskerX)\" x2=\"\(whiskerX)\" y1=\"\(format(barTop))\" y2=\"\(format(y(row.p99Ns)))\" stroke=\"#1f2933\" stroke-width=\"1\"/>"
                    out +=
                        "<line x1=\"\(format(x + barWidth / 2 - 5))\" x2=\"\(format(x + barWidth / 2 + 5))\" y1=\"\(format(y(row.p99Ns)))\" y2=\"\(format(y(row.p99Ns)))\" stroke=\"#1f2933\" stroke-width=\"1\"/>"
                }
                // The median's label sits above the whisker's cap, clear of it.
                let labelY = min(barTop, row.p99Ns.isFinite ? y(row.p99Ns) : barTop) - 4
                out +=
                    "<text x=\"\(format(x + barWidth / 2))\" y=\"\(format(labelY))\" text-anchor=\"middle\" font-size=\"9\" fill=\"#1f2933\">\(escape(formatNanoseconds(row.medianNs)))</text>\n"
            }
            out +=
                "<text x=\"\(format(x0 + groupWidth / 2))\" y=\"\(format(bottom + 16))\" text-anchor=\"middle\" font-size=\"12\">\(escape(group.0))</text>\n"
        }
        var legendX = left
        for (label, color) in legend {
            out +=
                "<rect x=\"\(format(legendX))\" y=\"\(format(bottom + 28))\" width=\"11\" height=\"11\" fill=\"\(color)\"/>"
            out +=
                "<text x=\"\(format(legendX + 15))\" y=\"\(format(bottom + 38))\" font-size=\"11\">\(escape(label))</text>\n"
            legendX += 34 + Double(label.count) * 6.3
        }
        return out
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
