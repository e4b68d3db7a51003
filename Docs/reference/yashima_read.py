#!/usr/bin/env python3
"""Read one entry of a YashimaShared storage directory, written from Docs/Format.md alone.

    yashima_read.py --storage=DIR --namespace=NS --identity=ID --codec=CODEC \
                    [--variant=NAME=VALUE ...] [--version=NAME=VALUE ...]
    yashima_read.py --identifiers --namespace=NS --identity=ID --codec=CODEC [...]

Writes the payload bytes to stdout and exits 0 on a hit; exits 1 with a one-line reason on stderr on a
miss; exits 2 when the directory is not a usable storage directory. With --identifiers it prints the
key's stableIdentifier and the entry identity (two lines of hex) and touches no file.

A read-only reader: it takes no lock, never writes, and does not touch the entry (so its hits do not
count for LRU order). Values are given as text: use --name=value so values may start with "-"; a
component's name is everything before the first "=". Standard library only.
"""

import argparse
import hashlib
import os
import stat
import struct
import sys
import time

# §4.2 CRC32C (Castagnoli): reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
def _table_entry(n):
    for _ in range(8):
        n = (n >> 1) ^ 0x82F63B78 if n & 1 else n >> 1
    return n


_TABLE = [_table_entry(n) for n in range(256)]


def crc32c(data, crc=0):
    """CRC32C of `data`, continuing `crc` (the result of an earlier call, or 0 to start)."""
    crc ^= 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


# §2 The canonical key form.
def field(content):
    return str(len(content)).encode() + b"\x00" + content + b"\x0a"


def canonical_key(namespace, identity, variants, versions):
    """All arguments are bytes; variants and versions are lists of (name, value) byte pairs."""
    out = field(b"yashima.cache-key.v1") + field(b"namespace") + field(namespace)
    out += field(b"identity") + field(identity)
    for label, components in ((b"variants", variants), (b"versions", versions)):
        components = sorted(components)  # by name, then value, as unsigned bytes; duplicates kept
        out += field(label) + field(str(len(components)).encode())
        for name, value in components:
            out += field(b"component") + field(name) + field(value)
    return out


# §3 Identifiers.
def entry_identity(key_bytes, codec_bytes):
    fields = field(b"yashima.cache-entry-identity.v1") + field(b"key") + field(key_bytes)
    return hashlib.sha256(fields + field(b"codec") + field(codec_bytes)).digest()


class Miss(Exception):
    pass


class Unusable(Exception):
    pass


def open_below(root_fd, parts):
    """Opens root/parts[0]/.../parts[-1] without following a symlink in any component (§1)."""
    fd = root_fd
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            next_fd = os.open(part, flags, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = next_fd
        return fd
    except OSError:
        if fd != root_fd:
            os.close(fd)
        raise


def check_layout(root_fd):
    """§1.1: `layout` must name layout version 1."""
    try:
        fd = open_below(root_fd, ["layout"])
    except FileNotFoundError:
        raise Unusable("no layout file: not a storage directory")
    try:
        text = os.read(fd, 4096).decode("utf-8")
    except UnicodeDecodeError:
        raise Unusable("unreadable layout file")
    finally:
        os.close(fd)
    prefix = "yashima-shared layout "
    version = text[len(prefix):].strip() if text.startswith(prefix) else ""
    if not (version.isascii() and version.isdigit()):
        raise Unusable("unreadable layout file")
    if int(version) != 1:
        raise Unusable("unsupported layout version %s" % version)


def read_entry(storage, key_bytes, codec_bytes, now):
    """Returns the payload of the entry, or raises Miss with the reason (§5)."""
    identity = entry_identity(key_bytes, codec_bytes)
    name = identity.hex()
    root_fd = os.open(storage, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        check_layout(root_fd)
        try:
            fd = open_below(root_fd, ["entries", name[:2], name + ".entry"])
        except FileNotFoundError:
            raise Miss("no entry file")  # 1
        except OSError as error:  # ELOOP: a symlink (2); other errors are misses for this tool
            raise Miss("cannot open the entry file: %s" % error.strerror)
    finally:
        os.close(root_fd)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise Miss("not a regular file")  # 2
        data = os.pread(fd, status.st_size, 0) if status.st_size else b""
    finally:
        os.close(fd)
    size = status.st_size
    if size < 128 or len(data) != size:
        raise Miss("file shorter than the entry header")  # 3
    (magic, version, flags, k, c, header_crc, p, _created, expires, payload_crc) = struct.unpack_from(
        "<8sHHIIIQqqI", data, 0)
    if magic != b"YSHENTRY":
        raise Miss("bad magic")  # 4
    if version != 1:
        raise Miss("unsupported entry format version %d" % version)  # 5
    if flags != 0:
        raise Miss("unknown header flags %d" % flags)  # 6
    if k > 64 << 20 or c > 4096 or p > (2**63 - 1) // 2:
        raise Miss("key or codec length out of range")  # 7
    header_size = 128 + k + c
    if header_size + p != size:
        raise Miss("file size %d does not match the header (%d)" % (size, header_size + p))  # 8
    if crc32c(data[24:header_size], crc32c(data[0:20])) != header_crc:
        raise Miss("header checksum mismatch")  # 9
    if (data[56:88] != identity or k != len(key_bytes) or c != len(codec_bytes)
            or data[128:128 + k] != key_bytes or data[128 + k:header_size] != codec_bytes):
        raise Miss("entry belongs to another key or codec")  # 10
    if expires != 0 and now >= expires:
        raise Miss("expired")  # 11
    payload = data[header_size:]
    if crc32c(payload) != payload_crc:
        raise Miss("payload checksum mismatch")  # 12
    return payload


def component(text):
    name, sep, value = os.fsencode(text).partition(b"=")
    if not sep:
        raise argparse.ArgumentTypeError("expected NAME=VALUE, got %r" % text)
    return (name, value)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--storage", help="the storage directory")
    parser.add_argument("--namespace", required=True, type=os.fsencode)
    parser.add_argument("--identity", required=True, type=os.fsencode)
    parser.add_argument("--variant", action="append", default=[], type=component, metavar="NAME=VALUE")
    parser.add_argument("--version", action="append", default=[], type=component, metavar="NAME=VALUE")
    parser.add_argument("--codec", required=True, type=os.fsencode, help="codec identifier, e.g. data-v1")
    parser.add_argument("--identifiers", action="store_true", help="print the two identifiers and exit")
    args = parser.parse_args(argv)

    key_bytes = canonical_key(args.namespace, args.identity, args.variant, args.version)
    if args.identifiers:
        print(hashlib.sha256(key_bytes).hexdigest())
        print(entry_identity(key_bytes, args.codec).hex())
        return 0
    if args.storage is None:
        parser.error("--storage is required unless --identifiers is given")
    try:
        payload = read_entry(args.storage, key_bytes, args.codec, time.time_ns())
    except Miss as miss:
        print("miss: %s" % miss, file=sys.stderr)
        return 1
    except (Unusable, OSError) as error:
        print("unusable storage directory: %s" % error, file=sys.stderr)
        return 2
    sys.stdout.buffer.write(payload)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
