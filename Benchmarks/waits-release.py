#!/usr/bin/env python3
# One process waits on N keys another holds (`yashima-stress worker hold-many` / `wait-many`, as
# ManyWaitsTests); prints the seconds from the holder's RELEASE to the waiter's last value, twice per binary.
# Usage: Benchmarks/waits-release.py N YASHIMA_STRESS [YASHIMA_STRESS ...] (alternate before and after).
import subprocess, sys, time, tempfile, json
def run(binary, keys):
    d = tempfile.mkdtemp(prefix="wb-")
    h = subprocess.Popen([binary, "worker", "hold-many", "--directory", d, "--keys", str(keys)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    while not h.stdout.readline().startswith("HOLDING"): pass
    w = subprocess.Popen([binary, "worker", "wait-many", "--directory", d, "--keys", str(keys)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    # startTogether: the worker may wait for a GO line
    line = w.stdout.readline()
    while not line.startswith("READY"): line = w.stdout.readline()
    w.stdin.write("GO\n"); w.stdin.flush()
    while not line.startswith("WAITING"): line = w.stdout.readline()
    t0 = time.monotonic()
    h.stdin.write("RELEASE\n"); h.stdin.flush()
    out = ""
    for line in w.stdout:
        if line.startswith("{"): out = line; break
    t1 = time.monotonic()
    r = json.loads(out)
    h.wait(); w.wait()
    return t1 - t0, r.get("right"), r.get("generated")
for b in sys.argv[2:]:
    print(b.split("/")[-1], sys.argv[1], ["%.3f s right=%s gen=%s" % run(b, int(sys.argv[1])) for _ in range(2)])
