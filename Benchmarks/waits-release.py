#!/usr/bin/env python3
# One process waits on N keys others hold (`yashima-stress worker hold-many` / `wait-many`, as
# ManyWaitsTests); prints the seconds from the holder's RELEASE to the waiter's last value, twice per binary.
# Usage: Benchmarks/waits-release.py N YASHIMA_STRESS [YASHIMA_STRESS ...] (alternate before and after).
import subprocess, sys, time, tempfile, json, shutil
def run(binary, keys):
    d = tempfile.mkdtemp(prefix="wb-")
    # One holder per 15,000 keys: each holds a descriptor per key, under the hard limit (20,000 here).
    holders = []
    for start in range(0, keys, 15000):
        h = subprocess.Popen([binary, "worker", "hold-many", "--directory", d, "--from", str(start), "--keys", str(min(15000, keys - start))], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        while not h.stdout.readline().startswith("HOLDING"): pass
        holders.append(h)
    w = subprocess.Popen([binary, "worker", "wait-many", "--directory", d, "--keys", str(keys)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    # startTogether: the worker may wait for a GO line
    line = w.stdout.readline()
    while not line.startswith("READY"): line = w.stdout.readline()
    w.stdin.write("GO\n"); w.stdin.flush()
    while not line.startswith("WAITING"): line = w.stdout.readline()
    t0 = time.monotonic()
    for h in holders: h.stdin.write("RELEASE\n"); h.stdin.flush()
    out = ""
    for line in w.stdout:
        if line.startswith("{"): out = line; break
    t1 = time.monotonic()
    r = json.loads(out)
    for h in holders: h.wait()
    w.wait()
    shutil.rmtree(d, ignore_errors=True)
    return t1 - t0, r.get("right"), r.get("generated")
for b in sys.argv[2:]:
    print(b.split("/")[-1], sys.argv[1], ["%.3f s right=%s gen=%s" % run(b, int(sys.argv[1])) for _ in range(2)])
