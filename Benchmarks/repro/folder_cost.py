#!/usr/bin/env python3
"""What one fan-out folder costs on this disk: 512 plain mkdirs, then 512 made the way the cache makes
them (mkdir under a staging name, open, fchmod, close, rename into place). Run from a folder on the disk
to measure: python3 Benchmarks/repro/folder_cost.py [DIRECTORY]."""
import os
import shutil
import sys
import tempfile
import time

base = sys.argv[1] if len(sys.argv) > 1 else None
plain = tempfile.mkdtemp(dir=base)
start = time.perf_counter()
for i in range(512):
    os.mkdir(f"{plain}/f{i:03x}", 0o700)
plain_us = (time.perf_counter() - start) / 512 * 1e6

staged = tempfile.mkdtemp(dir=base)
start = time.perf_counter()
for i in range(512):
    os.mkdir(f"{staged}/.folder-{i}", 0o700)
    fd = os.open(f"{staged}/.folder-{i}", os.O_RDONLY | os.O_DIRECTORY)
    os.fchmod(fd, 0o700)
    os.close(fd)
    os.rename(f"{staged}/.folder-{i}", f"{staged}/f{i:03x}")
staged_us = (time.perf_counter() - start) / 512 * 1e6

print(f"plain mkdir: {plain_us:.0f} µs per folder; staged (mkdir, open, fchmod, close, rename): {staged_us:.0f} µs")
shutil.rmtree(plain)
shutil.rmtree(staged)
