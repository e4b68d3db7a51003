#!/usr/bin/env python3
# ext4 (default auto_da_alloc) makes write-temp+rename OVER an existing file start writeback of the new
# data, so replacing costs milliseconds where a new name costs ~0.1 ms; renameat2(RENAME_EXCHANGE) + unlink
# of the old file does not trigger it. Run: python3 rename_over.py [DIR] (DIR on the file system to test).
import ctypes
import os
import sys
import time

directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp/rename-over-test"
os.makedirs(directory, exist_ok=True)
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2


def write(path, size=300):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * size)
    os.close(fd)


def run(mode, count=2000):
    samples = []
    for i in range(count):
        temp = f"{directory}/tmp{i}"
        target = f"{directory}/{mode}-{i if mode == 'new-name' else i % 100}"
        start = time.perf_counter_ns()
        write(temp)
        if mode == "exchange" and os.path.exists(target):
            if libc.renameat2(AT_FDCWD, temp.encode(), AT_FDCWD, target.encode(), RENAME_EXCHANGE) != 0:
                raise OSError(ctypes.get_errno(), "renameat2")
            os.unlink(temp)
        else:
            os.rename(temp, target)
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return samples[len(samples) // 2] / 1e3, samples[int(len(samples) * 0.99)] / 1e3


for mode in ["new-name", "rename-over", "exchange", "rename-over", "exchange"]:
    median, p99 = run(mode)
    print(f"{mode:12} write+rename median {median:8.1f} µs  p99 {p99:8.1f} µs")
