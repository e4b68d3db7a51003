// Draws the main benchmark results as a plain SVG bar chart (no dependencies): storage-hit latency by
// payload size for YashimaShared and the raw baselines, and the cross-process wait figures.

import Foundation

enum BenchChart {
    static func svg(_ rows: [BenchRow]) -> String {
        let sizes = ["4 KiB", "64 KiB", "1 MiB", "16 MiB"]
        let series: [(String, String, String)] = [
            ("raw open+read(2)+close", "raw read(2)", "#9aa5b1"),
            ("raw open+mmap+touch+munmap", "raw mmap+touch", "#52606d"),
            ("YCache storage hit +touch", "YashimaShared hit", "#d64545"),
        ]
        let width = 760.0
        let height = 420.0
        let left = 70.0
        let bottom = 340.0
        let top = 50.0
        var body = ""
        // Log scale from 1 µs to 100 ms.
        func y(_ ns: Double) -> Double {
            let clamped = min(max(ns, 1_000), 100_000_000)
            let fraction = (log10(clamped) - 3) / 5
            return bottom - fraction * (bottom - top)
        }
        for exponent in 3...8 {
            let ns = pow(10, Double(exponent))
            let label = ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms"][exponent - 3]
            body += "<line x1='\(left)' x2='\(width - 20)' y1='\(y(ns))' y2='\(y(ns))' stroke='#e4e7eb'/>"
            body += "<text x='\(left - 8)' y='\(y(ns) + 4)' text-anchor='end' font-size='11'>\(label)</text>"
        }
        let groupWidth = (width - left - 40) / Double(sizes.count)
        for (groupIndex, size) in sizes.enumerated() {
            let x0 = left + 10 + Double(groupIndex) * groupWidth
            for (seriesIndex, (prefix, _, color)) in series.enumerated() {
                guard let row = rows.first(where: { $0.name == "\(prefix) \(size)" }), row.medianNs.isFinite else { continue }
                let x = x0 + Double(seriesIndex) * (groupWidth - 30) / 3
                let barTop = y(row.medianNs)
                body += "<rect x='\(x)' y='\(barTop)' width='\((groupWidth - 40) / 3)' height='\(bottom - barTop)' fill='\(color)'/>"
            }
            body += "<text x='\(x0 + (groupWidth - 30) / 2)' y='\(bottom + 18)' text-anchor='middle' font-size='12'>\(size)</text>"
        }
        for (index, (_, label, color)) in series.enumerated() {
            let x = left + Double(index) * 200
            body += "<rect x='\(x)' y='\(height - 40)' width='12' height='12' fill='\(color)'/>"
            body += "<text x='\(x + 18)' y='\(height - 30)' font-size='12'>\(label)</text>"
        }
        var caption = "Storage-hit latency (median, log scale)"
        if let wake = rows.first(where: { $0.name == "YCache publish → waiting process returns" }),
            let raw = rows.first(where: { $0.name == "raw flock hand-off" })
        {
            caption += String(
                format: " · cross-process wake-up %@ (bare flock %@)", formatNanoseconds(wake.medianNs), formatNanoseconds(raw.medianNs))
        }
        if let stampede = rows.first(where: { $0.name == "stampede slowest wall − 200 ms" }) {
            caption += " · 8-process stampede overhead " + formatNanoseconds(stampede.medianNs)
        }
        return """
            <svg xmlns='http://www.w3.org/2000/svg' width='\(Int(width))' height='\(Int(height))' font-family='sans-serif'>
            <rect width='100%' height='100%' fill='white'/>
            <text x='\(left)' y='28' font-size='14' font-weight='bold'>\(caption)</text>
            \(body)
            </svg>

            """
    }
}
