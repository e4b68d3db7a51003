// The field encoding of the canonical forms (a key's, an entry identity's): each field is the decimal
// count of its bytes, a 0x00 byte, the bytes, and a 0x0A byte. A writer into a buffer sized in advance,
// a strict reader (any deviation from the exact encoding fails), and the fixed labels.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The fixed field texts of the canonical forms.
enum CanonicalLabel {
    /// The first field of a key's canonical form.
    static let keyMagic: StaticString = "yashima.cache-key.v1"
    /// The first field of an entry identity.
    static let entryMagic: StaticString = "yashima.cache-entry-identity.v1"
    /// Precedes the namespace.
    static let namespace: StaticString = "namespace"
    /// Precedes the identity.
    static let identity: StaticString = "identity"
    /// Precedes the variant count.
    static let variants: StaticString = "variants"
    /// Precedes the version count.
    static let versions: StaticString = "versions"
    /// Precedes each component's name and value.
    static let component: StaticString = "component"
    /// Precedes the key's canonical bytes in an entry identity.
    static let key: StaticString = "key"
    /// Precedes the codec identifier in an entry identity.
    static let codec: StaticString = "codec"
}

/// Writes canonical fields into a buffer sized in advance with the matching `fieldSize` functions.
///
/// A field is the decimal count of its bytes, a 0x00 byte, the bytes, and a 0x0A byte. Writing past
/// the end of the buffer is a programming error and traps.
struct CanonicalFieldWriter {
    /// The destination.
    private let buffer: UnsafeMutableRawBufferPointer
    /// The offset of the next byte to write.
    private var position = 0

    /// Creates a writer at the start of `buffer`.
    ///
    /// - Parameter buffer: The destination; must stay valid while the writer is used.
    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    /// Checks that exactly the precomputed number of bytes was written.
    ///
    /// - Parameter expected: The size computed with the `fieldSize` functions.
    /// - Returns: The number of bytes written, which is `expected`.
    func finish(expecting expected: Int) -> Int {
        precondition(position == expected, "canonical size mismatch")
        return position
    }

    /// The number of decimal digits in `value`.
    ///
    /// - Parameter value: A non-negative count.
    /// - Returns: The length of `value` written in shortest decimal.
    static func decimalDigitCount(_ value: Int) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    /// The encoded size of a field whose content is `length` bytes long.
    ///
    /// - Parameter length: The content's byte count.
    /// - Returns: Digits, separator, content and terminator together.
    static func fieldSize(length: Int) -> Int {
        decimalDigitCount(length) + 2 + length
    }

    /// The encoded size of a field holding the UTF-8 bytes of `text`.
    ///
    /// - Parameter text: The field's content.
    /// - Returns: The field's encoded size.
    static func fieldSize(_ text: String) -> Int {
        fieldSize(length: text.utf8.count)
    }

    /// The encoded size of a field holding a constant label.
    ///
    /// - Parameter text: The field's content.
    /// - Returns: The field's encoded size.
    static func fieldSize(_ text: StaticString) -> Int {
        fieldSize(length: text.utf8CodeUnitCount)
    }

    /// Appends raw bytes: a part of a field (between `fieldPrefix` and `fieldSuffix`) already encoded.
    mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        precondition(bytes.count <= buffer.count - position, "canonical buffer overflow")
        (buffer.baseAddress! + position).copyMemory(from: source, byteCount: bytes.count)
        position += bytes.count
    }

    /// Appends one byte.
    private mutating func write(_ byte: UInt8) {
        precondition(position < buffer.count, "canonical buffer overflow")
        buffer[position] = byte
        position += 1
    }

    /// Writes `value` in shortest decimal ASCII digits.
    private mutating func digits(_ value: Int) {
        if value < 10 {
            write(0x30 + UInt8(truncatingIfNeeded: value))
            return
        }
        let count = Self.decimalDigitCount(value)
        precondition(count <= buffer.count - position, "canonical buffer overflow")
        var rest = value
        for index in stride(from: position + count - 1, through: position, by: -1) {
            buffer[index] = 0x30 + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
        position += count
    }

    /// Writes a field's prefix: the decimal `length` and a 0x00 byte.
    ///
    /// - Parameter length: The byte count of the field's content.
    mutating func fieldPrefix(length: Int) {
        digits(length)
        write(0x00)
    }

    /// Writes a field's terminating 0x0A byte.
    mutating func fieldSuffix() {
        write(0x0A)
    }

    /// Writes a whole field holding `bytes`.
    ///
    /// - Parameter bytes: The field's content.
    mutating func field(_ bytes: UnsafeRawBufferPointer) {
        fieldPrefix(length: bytes.count)
        write(bytes)
        fieldSuffix()
    }

    /// Writes a whole field holding the UTF-8 bytes of `text`.
    ///
    /// - Parameter text: The field's content.
    mutating func field(_ text: String) {
        let written: Void? = text.utf8.withContiguousStorageIfAvailable { field(UnsafeRawBufferPointer($0)) }
        if written == nil {
            var copy = text
            copy.withUTF8 { field(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Writes a whole field holding the UTF-8 bytes of a constant label.
    ///
    /// - Parameter text: The field's content.
    mutating func field(_ text: StaticString) {
        text.withUTF8Buffer { field(UnsafeRawBufferPointer($0)) }
    }

    /// Writes a whole field holding `value` in shortest decimal ASCII digits.
    ///
    /// - Parameter value: A non-negative count.
    mutating func decimalField(_ value: Int) {
        fieldPrefix(length: Self.decimalDigitCount(value))
        digits(value)
        fieldSuffix()
    }
}

/// Reads canonical fields back, strictly: any deviation from the exact encoding fails.
struct CanonicalFieldReader {
    /// The whole input.
    let buffer: UnsafeBufferPointer<UInt8>
    /// The offset of the next unread byte.
    private(set) var position = 0

    /// Creates a reader at the start of `buffer`.
    ///
    /// - Parameter buffer: The canonical bytes; must stay valid while the reader is used.
    init(buffer: UnsafeBufferPointer<UInt8>) {
        self.buffer = buffer
    }

    /// Whether every byte has been read.
    var isAtEnd: Bool { position == buffer.count }

    /// The number of unread bytes.
    var remaining: Int { buffer.count - position }

    /// Reads the next field's content, or returns `nil` if it is malformed or truncated.
    ///
    /// The length must be shortest decimal (no leading zeros), followed by 0x00, the content, and 0x0A.
    ///
    /// - Returns: The field's content, pointing into ``buffer``.
    mutating func field() -> UnsafeBufferPointer<UInt8>? {
        var cursor = position
        var length = 0
        var digits = 0
        while cursor < buffer.count, buffer[cursor] != 0x00 {
            let byte = buffer[cursor]
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            guard digits == 0 || length != 0 else { return nil }  // no leading zeros
            digits += 1
            guard digits <= 18 else { return nil }  // cannot overflow, and no input is that long
            length = length * 10 + Int(byte - 0x30)
            cursor += 1
        }
        guard digits > 0, cursor < buffer.count else { return nil }
        cursor += 1  // the 0x00 separator
        guard length < buffer.count - cursor, buffer[cursor + length] == 0x0A else { return nil }
        let content = UnsafeBufferPointer(rebasing: buffer[cursor..<(cursor + length)])
        position = cursor + length + 1
        return content
    }

    /// Reads a field and checks that it holds exactly `label`.
    ///
    /// - Parameter label: The expected content.
    /// - Returns: Whether the field was present and matched.
    mutating func expect(_ label: StaticString) -> Bool {
        guard let content = field() else { return false }
        return label.withUTF8Buffer { expected in
            expected.count == content.count && expected.elementsEqual(content)
        }
    }

    /// Reads a field holding valid UTF-8 text.
    ///
    /// - Returns: The text, or `nil` if the field is malformed or not valid UTF-8.
    mutating func string() -> String? {
        guard let content = field() else { return nil }
        // Decoding repairs invalid UTF-8 with U+FFFD, so the input was valid exactly when the decoded
        // bytes are identical to it. (This avoids String(validating:as:), which is generic and slow.)
        var text = String(decoding: content, as: UTF8.self)
        let identical = text.withUTF8 { decoded in
            decoded.count == content.count
                && (decoded.isEmpty || memcmp(decoded.baseAddress!, content.baseAddress!, decoded.count) == 0)
        }
        return identical ? text : nil
    }

    /// Reads a field holding a count in shortest decimal ASCII digits.
    ///
    /// - Returns: The count, or `nil` if the field is malformed, has leading zeros or is too long.
    mutating func decimal() -> Int? {
        guard let content = field(), !content.isEmpty, content.count <= 18 else { return nil }
        guard content.count == 1 || content[0] != 0x30 else { return nil }
        var value = 0
        for byte in content {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }
}
