#!/usr/bin/env python3
"""User-space instructions per operation: the daemon's workers beside the
closed-loop floor, counted by Valgrind's callgrind in one process.

CPU seconds per operation (`cargo bench --bench generator -- closed`) move
by 5-10 % from run to run and by more from one day to the next on a shared
2-core VM, which has no hardware counters for `perf stat`. Instructions
counted by callgrind do not move: this gives the part of the closed-loop
ratio that is code, apart from the kernel's and the caches' part.

It runs the generator bench's `closed` comparison with the daemon in the
floor's process (`GEN_CLOSED=inprocess`: one allocator, one runtime) under
`valgrind --tool=callgrind`, then reads from the profile:

- the daemon's operations: calls to `drop_in_place` of a worker's
  `execute` future (one per operation, whatever it was);
- every operation's driver call: calls to the driver's `build` of the find
  and insert operations (one per request); the floor's operations are
  these less the daemon's and less the prepare step's batches (calls to
  `build` that came from `insert_many`);
- instructions inclusive of each side's task: `Worker::run` for the
  daemon, `floor_closed`'s task for the floor, and inside them the
  driver's call alone (`Deployment::execute_unbounded` for the daemon;
  the floor's `find_one`/`insert_one` futures).

Work the driver does on tasks of its own (the pool's worker, the
monitors, and with `--floor naive` the check-in of every implicit session)
is in neither side's figure: the whole process's total is printed beside.

Run: `python3 benches/instructions.py [--mix write] [--floor naive]`
after `cargo bench --bench generator --no-run` (it finds the newest
generator executable) and a release `mongoload` (`GEN_BIN`, default
`target/release/mongoload`). Needs valgrind; takes about 3 minutes.
The bench process runs on glibc malloc unless `GEN_ALLOCATOR=jemalloc`
is set (the shipped binary's allocator: issue 26's strongest floor);
the variable passes through to the bench.
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile


def newest_generator():
    found = [
        p
        for p in glob.glob("target/release/deps/generator-*")
        if os.access(p, os.X_OK) and not p.endswith(".d")
    ]
    if not found:
        sys.exit("instructions.py: no generator bench executable; run "
                 "`cargo bench --bench generator --no-run` first")
    return max(found, key=os.path.getmtime)


def calls(path):
    """Calls into each function, by name."""
    names, by_id, callee = {}, {}, None
    with open(path) as f:
        for line in f:
            m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                kind, idx, name = m.groups()
                if name:
                    names[idx] = name
                if kind == "cfn":
                    callee = idx
                continue
            m = re.match(r"^calls=(\d+)", line)
            if m and callee is not None:
                by_id[callee] = by_id.get(callee, 0) + int(m.group(1))
    table = {}
    for i, n in by_id.items():
        table[names.get(i, "?")] = table.get(names.get(i, "?"), 0) + n
    return table


def inclusive(path):
    """Inclusive instructions of every function, by name."""
    out = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", path],
        check=True, capture_output=True, text=True).stdout
    costs = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+) \([^)]*\)\s+[^:]*:(.*?) \[", line)
        if m:
            name = m.group(2)
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs


def summed(table, pattern):
    return sum(v for k, v in table.items() if re.search(pattern, k))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mix", choices=["find", "write"], default="find")
    ap.add_argument("--floor", choices=["session", "naive"], default="session")
    ap.add_argument("--secs", default="10")
    ap.add_argument("--rounds", default="2")
    ap.add_argument("--profile", help="read this callgrind profile instead of running the bench")
    a = ap.parse_args()
    if a.profile:
        report(a, [], *read(a.profile))
        return
    gen = newest_generator()
    env = dict(os.environ,
               GEN_CLOSED="inprocess", GEN_ROUNDS=a.rounds, GEN_SECS=a.secs,
               GEN_BIN=os.environ.get("GEN_BIN", "target/release/mongoload"))
    if a.mix == "write":
        env["GEN_MIX"] = "write"
    if a.floor == "session":
        env["GEN_FLOOR"] = "session"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
             gen, "closed"],
            env=env, capture_output=True, text=True)
        if run.returncode != 0 or not os.path.exists(out):
            sys.exit(f"instructions.py: the bench failed under valgrind:\n{run.stderr[-2000:]}")
        rounds = [l for l in run.stdout.splitlines() if l.startswith(("round", "MEDIAN", "=="))]
        report(a, rounds, *read(out))


def read(profile):
    return calls(profile), inclusive(profile)


def report(a, rounds, calls, inc):
    daemon_ops = summed(calls, r"^core::ptr::drop_in_place<mongoload::engine::worker::Worker::execute::\{\{closure\}\}>$")
    requests = summed(calls, r"^<mongodb::operation::(find::Find|insert::Insert) as mongodb::operation::BaseOperation>::build$")
    batches = summed(calls, r"^core::ptr::drop_in_place<<mongodb::action::insert_many::InsertMany")
    floor_ops = requests - daemon_ops - batches
    daemon = summed(inc, r"^mongoload::engine::worker::Worker::run::\{\{closure\}\}$")
    daemon_driver = summed(inc, r"^mongoload::mongo::Deployment::execute_unbounded::\{\{closure\}\}$")
    floor = summed(inc, r"^generator::floor_closed::\{\{closure\}\}::\{\{closure\}\}$")
    total = summed(inc, r"^<std::sys::thread::unix::Thread>::new::thread_start$")
    for line in rounds:
        print("  (under callgrind) " + line)
    if min(daemon_ops, floor_ops) <= 0 or min(daemon, floor) <= 0:
        sys.exit(f"instructions.py: nothing counted (daemon ops {daemon_ops}, floor ops {floor_ops})")
    d, f = daemon / daemon_ops, floor / floor_ops
    print(f"mix {a.mix}, floor {a.floor}: daemon {daemon_ops} operations, floor {floor_ops}")
    print(f"  daemon worker task: {d:,.0f} instructions/op "
          f"(of them the driver call {daemon_driver / daemon_ops:,.0f}, mongoload's own {d - daemon_driver / daemon_ops:,.0f})")
    print(f"  floor task:         {f:,.0f} instructions/op")
    print(f"  ratio daemon/floor: {d / f:.3f}")
    print(f"  whole process, both sides and every other task: {total:,} instructions "
          f"({total / (daemon_ops + floor_ops):,.0f} per operation of either side)")


if __name__ == "__main__":
    main()
