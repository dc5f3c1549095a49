#!/usr/bin/env python3
"""Idle wake-ups of a closed-loop stage with 8 workers (max_inflight 256,
so 248 idle): context switches of every thread of `mongoload run` over
10 s (three times, median), with its ops/s and CPU, against `mongoload sim
--latency L`. Usage: benches/wakeups.py path/to/mongoload [20ms]."""
import os, socket, subprocess, sys, tempfile, time, urllib.request, glob

binary = sys.argv[1]
latency = sys.argv[2] if len(sys.argv) > 2 else "20ms"

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def ctx(pid):
    v = n = 0
    for st in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            for line in open(st):
                if line.startswith("voluntary_ctxt_switches"): v += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"): n += int(line.split()[1])
        except FileNotFoundError:
            pass
    return v, n

def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

def ops(http):
    body = urllib.request.urlopen(f"http://{http}/metrics", timeout=5).read().decode()
    return sum(float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
               if l.startswith("mongoload_operations_total{"))

d = tempfile.mkdtemp()
sim_port, http_port = free_port(), free_port()
sim = subprocess.Popen([binary, "sim", "--listen", f"127.0.0.1:{sim_port}", "--latency", latency],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
cfg = f"""[target]
uri = "mongodb://127.0.0.1:{sim_port}/?directConnection=true"
database = "wake"
[http]
listen = "127.0.0.1:{http_port}"
[[workloads]]
name = "w"
kind = "mixed"
[workloads.mixed]
insert = 0
update = 0
delete = 0
find = 1
find_by_k = 0
update_by_k = 0
initial_docs = 1000
doc_size = "1KiB"
[[workloads.stages]]
name = "hold"
concurrency = 8
duration = "120s"
"""
open(f"{d}/c.toml", "w").write(cfg)
time.sleep(1)
run = subprocess.Popen([binary, "run", "--config", f"{d}/c.toml"], stdout=subprocess.DEVNULL,
                       stderr=open(f"{d}/err", "w"), env={**os.environ, "RUST_LOG": "warn"})
try:
    deadline = time.time() + 60
    while True:
        try:
            if ops(f"127.0.0.1:{http_port}") > 50: break
        except Exception:
            pass
        if time.time() > deadline: raise SystemExit("daemon never ran: " + open(f"{d}/err").read())
        time.sleep(0.5)
    time.sleep(5)
    rows = []
    for rep in range(3):
        v0, n0 = ctx(run.pid); c0 = cpu(run.pid); o0 = ops(f"127.0.0.1:{http_port}"); t0 = time.time()
        time.sleep(10)
        v1, n1 = ctx(run.pid); c1 = cpu(run.pid); o1 = ops(f"127.0.0.1:{http_port}"); t1 = time.time()
        dt = t1 - t0
        rows.append(((v1 - v0) / dt, (n1 - n0) / dt, (o1 - o0) / dt, (c1 - c0) / dt))
        print(f"rep {rep}: voluntary {rows[-1][0]:.0f}/s, nonvoluntary {rows[-1][1]:.0f}/s, ops {rows[-1][2]:.0f}/s, CPU {rows[-1][3]*100:.1f}%")
    rows.sort(key=lambda r: r[0])
    m = rows[1]
    print(f"MEDIAN voluntary ctxt switches {m[0]:.0f}/s (nonvoluntary {m[1]:.0f}/s) at {m[2]:.0f} ops/s, CPU {m[3]*100:.1f}% of a core; per op {m[0]/max(m[2],1):.2f}; load average {open('/proc/loadavg').read().split()[:3]}")
finally:
    run.terminate(); run.wait(timeout=20); sim.terminate(); sim.wait()
