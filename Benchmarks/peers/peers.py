#!/usr/bin/env python3
# Peers for the YashimaShared benchmarks: python-diskcache and LMDB run YashimaShared's workloads (storage
# hit, write, 8-process stampede, diskcache-shaped 100:10:1 mix) and print one JSON document on stdout.
# Run through Benchmarks/peers/run.sh, which makes the virtual environment; see Benchmarks/README.md.
"""Runs the peer workloads and prints JSON rows shaped like `yashima-stress bench --format json`.

Handle semantics (as close to "a fresh YCache with an empty memory layer" as each library allows):
- diskcache: the Cache is opened anew after the values are written and kept open while timing, as an
  application keeps its Cache; diskcache has no in-process value cache, so every get reads SQLite (values
  under 32 KiB live in the database) or the value's file (32 KiB and more).
- LMDB: the environment is opened anew after the writes (LMDB allows one open environment per file per
  process); every get is a fresh read transaction that copies the value out (`txn.get`, buffers=False).
Python returns values as bytes copies, and the copy reads every page, so no separate touch is done.
Writes: diskcache with its defaults (SQLite WAL, synchronous=NORMAL: no fsync per set); LMDB with
sync=False (no fsync per commit), matching YashimaShared and the raw baseline, which do not fsync.
"""

import argparse
import array
import json
import multiprocessing as mp
import os
import platform
import random
import shutil
import statistics
import sys
import time

import diskcache
import lmdb

KIB = 1 << 10
MIB = 1 << 20


def label(size):
    return f"{size // MIB} MiB" if size >= MIB else f"{size // KIB} KiB"


def percentile(sorted_values, p):
    """Nearest rank on (n - 1), the same rule as the Swift suite's Samples.percentile."""
    if not sorted_values:
        return float("nan")
    rank = min(len(sorted_values) - 1, max(0, int(round(p / 100 * (len(sorted_values) - 1)))))
    return sorted_values[rank]


def row(section, library, name, samples, note=None, **extra):
    values = sorted(samples)
    result = {
        "section": section,
        "library": library,
        "name": name,
        "count": len(values),
        "medianNs": percentile(values, 50),
        "p90Ns": percentile(values, 90),
        "p99Ns": percentile(values, 99),
        "minNs": values[0] if values else float("nan"),
        "maxNs": values[-1] if values else float("nan"),
    }
    if note:
        result["note"] = note
    result.update(extra)
    return result


def log(message):
    print(message, file=sys.stderr, flush=True)


def fresh_directory(base, name):
    path = os.path.join(base, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def open_lmdb(path, map_size=4 << 30):
    # sync=False: no fsync per commit (YashimaShared and the raw baseline do not fsync either).
    return lmdb.open(path, map_size=map_size, sync=False, max_readers=64, lock=True)


def payload_of(size, seed=31):
    return bytes((i * seed) & 0xFF for i in range(size))


# MARK: single process


def iterations_for(size, quick):
    # The same counts as the Swift suite's single-process section.
    if quick:
        return max(20, min(2000, (64 * MIB) // size // 4)), 3
    return max(50, min(10_000, (256 * MIB) // size // 4)), 5


def measure(rounds, iterations, body):
    samples = []
    clock = time.perf_counter_ns
    for round_index in range(rounds + 1):  # one warm-up round, discarded
        for _ in range(iterations):
            start = clock()
            body()
            elapsed = clock() - start
            if round_index > 0:
                samples.append(elapsed)
    return samples


def storage_hits(base, quick):
    rows = []
    sizes = [4 * KIB, 64 * KIB, MIB]
    dc_path = fresh_directory(base, "diskcache-hits")
    lm_path = fresh_directory(base, "lmdb-hits")
    writer = diskcache.Cache(dc_path)
    env = open_lmdb(lm_path)
    for size in sizes:
        value = payload_of(size)
        writer.set(f"payload-{size}".encode(), value)
        with env.begin(write=True) as txn:
            txn.put(f"payload-{size}".encode(), value)
    writer.close()
    env.close()
    time.sleep(0.5)
    cache = diskcache.Cache(dc_path)
    env = open_lmdb(lm_path)
    for size in sizes:
        iterations, rounds = iterations_for(size, quick)
        key = f"payload-{size}".encode()
        assert len(cache.get(key)) == size

        def dc_get():
            cache.get(key)

        def lm_get():
            with env.begin() as txn:
                txn.get(key)

        where = "SQLite blob" if size < 32 * KIB else "file beside SQLite"
        rows.append(row("single", "diskcache", f"diskcache storage hit {label(size)}", measure(rounds, iterations, dc_get),
                        note=f"Cache.get, value in {where}", workload="storage hit", size=size))
        rows.append(row("single", "lmdb", f"LMDB storage hit {label(size)}", measure(rounds, iterations, lm_get),
                        note="read txn + get (copy)", workload="storage hit", size=size))
        log(f"storage hit {label(size)} done")
    cache.close()
    env.close()
    return rows


def writes(base, quick):
    rows = []
    for size in [4 * KIB, MIB]:
        count = (40 if quick else 150) if size > 64 * KIB else (200 if quick else 2000)
        value = payload_of(size, seed=1)
        dc_path = fresh_directory(base, f"diskcache-writes-{size}")
        lm_path = fresh_directory(base, f"lmdb-writes-{size}")
        cache = diskcache.Cache(dc_path)
        env = open_lmdb(lm_path)
        dc_samples, lm_samples = [], []
        clock = time.perf_counter_ns
        for index in range(count):
            key = f"write-{size}-{index}".encode()
            # Alternate which library goes first, as the Swift suite alternates raw and cache writes.
            for turn in ((0, 1) if index % 2 == 0 else (1, 0)):
                start = clock()
                if turn == 0:
                    cache.set(key, value)
                    dc_samples.append(clock() - start)
                else:
                    with env.begin(write=True) as txn:
                        txn.put(key, value)
                    lm_samples.append(clock() - start)
        cache.close()
        env.close()
        rows.append(row("single", "diskcache", f"diskcache set (new key) {label(size)}", dc_samples,
                        note="Cache.set", workload="write", size=size))
        rows.append(row("single", "lmdb", f"LMDB put (new key) {label(size)}", lm_samples,
                        note="write txn + put + commit, sync=False", workload="write", size=size))
        log(f"write {label(size)} done")
    return rows


# MARK: stampede


def ledger_append(path, line):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def stampede_child(recipe, path, ledger, barrier, results):
    value = payload_of(4 * KIB)

    def generate():
        ledger_append(ledger, f"{os.getpid()}")
        time.sleep(0.2)
        return value

    if recipe == "lmdb":
        env = open_lmdb(path, map_size=64 << 20)
        key = b"hot"

        def call():
            with env.begin() as txn:
                found = txn.get(key)
            if found is not None:
                return found
            # LMDB allows one write transaction at a time: waiters block in begin(write=True).
            with env.begin(write=True) as txn:
                found = txn.get(key)
                if found is None:
                    found = generate()
                    txn.put(key, found)
            return found
    else:
        cache = diskcache.Cache(path)
        memoized = cache.memoize(name="hot")(generate)
        if recipe == "diskcache-barrier":
            call = diskcache.barrier(cache, diskcache.Lock, name="hot-lock")(memoized)
        else:
            call = memoized
    barrier.wait()
    start = time.perf_counter_ns()
    result = call()
    elapsed = time.perf_counter_ns() - start
    assert len(result) == 4 * KIB
    results.put(elapsed)


def stampede(base, quick):
    rows = []
    rounds = 3 if quick else 10
    context = mp.get_context("fork")
    recipes = [
        ("diskcache-memoize", "diskcache", "diskcache memoize", "plain @cache.memoize(): every process misses and generates"),
        ("diskcache-barrier", "diskcache", "diskcache barrier(Lock) + memoize",
         "@diskcache.barrier(cache, diskcache.Lock) over @cache.memoize(): a spin lock polled every 1 ms"),
        ("lmdb", "lmdb", "LMDB write-txn lock",
         "our recipe: read txn, then on a miss begin(write=True) (one writer at a time), look again, generate"),
    ]
    for recipe, library, title, how in recipes:
        slowest, medians, generations = [], [], []
        for round_index in range(rounds):
            path = fresh_directory(base, f"stampede-{recipe}-{round_index}")
            ledger = path + ".ledger"
            if os.path.exists(ledger):
                os.unlink(ledger)
            barrier = context.Barrier(8)
            results = context.Queue()
            children = [context.Process(target=stampede_child, args=(recipe, path, ledger, barrier, results))
                        for _ in range(8)]
            for child in children:
                child.start()
            walls = sorted(results.get(timeout=120) for _ in children)
            for child in children:
                child.join()
            slowest.append(walls[-1] - 200_000_000)
            medians.append(statistics.median(walls) - 200_000_000)
            with open(ledger) as handle:
                generations.append(sum(1 for _ in handle))
        per_round = ",".join(str(g) for g in generations)
        rows.append(row("crossprocess", library, f"{title}: stampede slowest wall − 200 ms", slowest,
                        note=f"{how}; median process {statistics.median(medians) / 1e6:.2f} ms; "
                             f"generations per round: {per_round}",
                        workload="stampede", generations=generations))
        log(f"stampede {title} done")
    return rows


# MARK: diskcache-shaped mix


def mix_child(library, path, number, operations, samples_prefix, barrier):
    """python-diskcache's tests/benchmark_core.py worker: 100 keys, 90 % get / 9 % set / 1 % delete."""
    random.seed(number)
    if library == "lmdb":
        env = open_lmdb(path, map_size=1 << 30)

        def get(key):
            with env.begin() as txn:
                return txn.get(key)

        def put(key, value):
            with env.begin(write=True) as txn:
                txn.put(key, value)

        def delete(key):
            with env.begin(write=True) as txn:
                txn.delete(key)
    else:
        cache = diskcache.Cache(path)
        get, put, delete = cache.get, cache.set, cache.delete
    timings = {"get": array.array("d"), "set": array.array("d"), "delete": array.array("d")}
    misses = 0
    clock = time.perf_counter_ns
    barrier.wait()
    for count in range(operations):
        key = str(random.randrange(100)).encode()
        value = str(count).encode() * random.randrange(1, 100)
        choice = random.random()
        if choice < 0.900:
            start = clock()
            result = get(key)
            elapsed = clock() - start
            action = "get"
            miss = result is None
        elif choice < 0.990:
            start = clock()
            put(key, value)
            elapsed = clock() - start
            action = "set"
            miss = False
        else:
            start = clock()
            delete(key)
            elapsed = clock() - start
            action = "delete"
            miss = False
        if count > 1000:  # diskcache's WARMUP
            timings[action].append(elapsed)
            if miss:
                misses += 1
    for action, values in timings.items():
        with open(f"{samples_prefix}-{action}.f64", "wb") as handle:
            values.tofile(handle)
    with open(f"{samples_prefix}-misses", "w") as handle:
        handle.write(str(misses))


def mix(base, quick):
    rows = []
    operations = 5_000 if quick else 100_000
    context = mp.get_context("fork")
    for library, title in [("diskcache", "diskcache"), ("lmdb", "LMDB")]:
        for processes in [1, 8]:
            path = fresh_directory(base, f"mix-{library}")
            samples = fresh_directory(base, f"mix-{library}-samples")
            if library == "lmdb":
                env = open_lmdb(path, map_size=1 << 30)
                with env.begin(write=True) as txn:
                    for key in range(100):
                        txn.put(str(key).encode(), str(key).encode())
                env.close()
            else:
                cache = diskcache.Cache(path)
                for key in range(100):
                    cache.set(str(key).encode(), str(key).encode())
                cache.close()
            barrier = context.Barrier(processes + 1)
            children = [context.Process(target=mix_child, args=(library, path, number, operations,
                                                                f"{samples}/w{number}", barrier))
                        for number in range(processes)]
            for child in children:
                child.start()
            barrier.wait()
            start = time.perf_counter_ns()
            for child in children:
                child.join()
            wall = (time.perf_counter_ns() - start) / 1e9
            misses = 0
            for number in range(processes):
                with open(f"{samples}/w{number}-misses") as handle:
                    misses += int(handle.read())
            plural = "" if processes == 1 else "es"
            for action in ["get", "set", "delete"]:
                merged = array.array("d")
                for number in range(processes):
                    with open(f"{samples}/w{number}-{action}.f64", "rb") as handle:
                        merged.frombytes(handle.read())
                note = f"n={len(merged)}"
                if action == "get":
                    note += f", {misses} misses"
                if action == "delete":
                    note += f"; wall {wall:.1f} s"
                rows.append(row("crossprocess", library, f"{title} mix 100:10:1, {processes} process{plural}: {action}",
                                list(merged), note=note, workload="mix", processes=processes, action=action))
            log(f"mix {title} {processes} process{plural} done in {wall:.1f} s")
    return rows


def host_description():
    model = "unknown CPU"
    memory = ""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    memory = f", {int(line.split()[1]) / 1048576:.0f} GiB RAM"
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {model}{memory}, Linux {platform.release()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--directory", required=True, help="scratch folder for the libraries' files")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and 5,000 mix operations")
    parser.add_argument("--only", action="append", choices=["hits", "writes", "stampede", "mix"],
                        help="run only these workloads (repeatable)")
    arguments = parser.parse_args()
    chosen = arguments.only or ["hits", "writes", "stampede", "mix"]
    base = arguments.directory
    os.makedirs(base, exist_ok=True)
    began = time.time()
    with open("/proc/loadavg") as handle:
        load_start = " ".join(handle.read().split()[:3])
    rows = []
    if "hits" in chosen:
        rows += storage_hits(base, arguments.quick)
    if "writes" in chosen:
        rows += writes(base, arguments.quick)
    if "stampede" in chosen:
        rows += stampede(base, arguments.quick)
    if "mix" in chosen:
        rows += mix(base, arguments.quick)
    with open("/proc/loadavg") as handle:
        load_end = " ".join(handle.read().split()[:3])
    document = {
        "host": host_description(),
        "python": platform.python_version(),
        "diskcache": diskcache.__version__,
        "lmdb": f"py-lmdb {lmdb.__version__}, LMDB {'.'.join(str(part) for part in lmdb.version())}",
        "quick": arguments.quick,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(began)),
        "seconds": round(time.time() - began, 1),
        "load": {"start": load_start, "end": load_end},
        "rows": rows,
    }
    json.dump(document, sys.stdout, indent=1, allow_nan=True)
    print()


if __name__ == "__main__":
    main()
