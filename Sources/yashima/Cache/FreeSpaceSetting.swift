// The `min-free` setting (issue 38): the free space the cache leaves on its filesystem, a size (`2G`) or a
// share of the filesystem (`5%`), `0` or `none` for no floor, the library's default (the smaller of 5 % and
// 1 GiB) when unset. Every command that opens the cache keeps it; `stats` shows it, `config` sets it.

import Foundation
@_spi(Operator) import YashimaShared

enum FreeSpaceSetting {
    /// How the default floor is shown.
    static let defaultText = "5%, at most 1 GiB"

    /// A `min-free` value: a size, a percentage, or `0`/`none` (nil: no floor).
    static func parse(_ text: String) throws -> YCache.FreeSpaceFloor? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if ["0", "none"].contains(trimmed.lowercased()) { return nil }
        guard trimmed.hasSuffix("%") else { return .bytes(try parseSize(trimmed, option: "min-free")) }
        guard let percent = Double(trimmed.dropLast()), percent.isFinite, (0...100).contains(percent) else {
            throw UsageError("min-free must be a size such as 2G or a percentage such as 5%, not '\(text)'")
        }
        return percent == 0 ? nil : .fraction(percent / 100)
    }

    /// The floor in force for `location` (environment, the directory's file, the user's file, the
    /// default), as given, and where it came from.
    static func current(_ location: Location) throws -> (floor: YCache.FreeSpaceFloor?, text: String, SettingSource) {
        guard let (text, source) = try Settings.value("min-free", directory: location.path) else {
            return (.standard, defaultText, .builtIn)
        }
        return (try parse(text), text, source)
    }

    /// `current`, or the default when the setting cannot be read (a settings file this user may not
    /// read, a value a hand edit broke: `yashima config` reports those): a floor is never a reason for a
    /// command to fail.
    static func inForce(_ location: Location) -> (floor: YCache.FreeSpaceFloor?, text: String, SettingSource) {
        (try? current(location)) ?? (.standard, defaultText, .builtIn)
    }
}
