#!/usr/bin/env python3
# One process waits on N keys others hold (`yashima-stress worker hold-many` / `wait-many`, as
# ManyWaitsTests); prints the seconds from the holder's RELEASE to the waiter's last value, and the CPU
# seconds the holders and the waiter spent from the release to their exit, twice per binary.
# Usage: Benchmarks/waits-release.py N YASHIMA_STRESS [YASHIMA_STRESS ...] (alternate before and after).
import subprocess, sys, time, tempfile, json, shutil, os
def cpu(pid):
    # user + system seconds of a running process so far (/proc/PID/stat fields 14 and 15)
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
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
    spent = {p.pid: cpu(p.pid) for p in holders + [w]}
    t0 = time.monotonic()
    for h in holders: h.stdin.write("RELEASE\n"); h.stdin.flush()
    out = ""
    for line in w.stdout:
        if line.startswith("{"): out = line; break
    t1 = time.monotonic()
    r = json.loads(out)
    # CPU of the holders and of the waiter from the release to their exit (the set-up before it left out)
    def reap(p):
        _, _, usage = os.wait4(p.pid, 0)
        p.returncode = 0
        return usage.ru_utime + usage.ru_stime - spent[p.pid]
    holding = sum(reap(h) for h in holders)
    waiting = reap(w)
    shutil.rmtree(d, ignore_errors=True)
    return t1 - t0, holding, waiting, r.get("right"), r.get("generated")
for b in sys.argv[2:]:
    print(b.split("/")[-1], sys.argv[1], ["%.3f s cpu holders %.2f s waiter %.2f s right=%s gen=%s" % run(b, int(sys.argv[1])) for _ in range(2)])
