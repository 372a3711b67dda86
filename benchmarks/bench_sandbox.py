"""Throughput of the sandbox vs. a fresh isolated process per call, measured in the same run, and the cost
of each measure against state shared between calls, switched off one at a time.

    .venv/bin/python benchmarks/bench_sandbox.py [--calls 3000] [--fresh-calls 300] [--rounds 3]
                                                 [--measure-calls 2000] [--measure-rounds 3] [--workers N]

Targets: the trivial grade() rate >= 1,000 calls/s and >= 10x the fresh process.

Measures (`agentrl.sandbox.harden.MEASURES`): each gets a sandbox of its own started with
AGENTRL_SANDBOX_BENCH_OFF naming it (its isolation report then says the sandbox is weak), and one more has
every measure on. Their CPU per trivial grader call is measured in interleaved rounds; the difference to
"all on" is what that measure costs. Measures that cannot be switched off are printed with how they cost:
the request id on every reply (one integer in a JSON header) and the plain-data rule for `== literal`
asserts (a probe with a comparison inside now runs in two processes: the last lines compare the two).

Both sides use as many client threads as the machine has cores (at least 2), or --workers N (and a sandbox
of N workers). The fresh-process
baseline is generous: `python -I -S` applying the same kernel isolation (network/IPC/UTS namespaces,
rlimits, Landlock, uid drop, seccomp) but running the grader with plain exec, without RestrictedPython.
Other jobs on the machine disturb the numbers: the script runs several rounds and prints each, and also
the CPU time one call costs (host + zygote + forked children, or host + fresh process), which other jobs
disturb much less; "cpu-bound rate" = cores / CPU seconds per call is what an idle machine would reach.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import agentrl.sandbox as sandbox_pkg
from agentrl.rewards import load_reward
from agentrl.sandbox import Sandbox
from agentrl.sandbox.harden import MEASURES

GRADER = "def grade(sample, item):\n    return 1.0 if sample.final_answer.strip() == item['answer'] else 0.0\n"
HARDEN = str(Path(sandbox_pkg.__file__).parent)  # harden.py and seccomp.py, imported without the package
FRESH = r"""
import json, sys, types
pkg = types.ModuleType("sbx"); pkg.__path__ = [HARDEN]; sys.modules["sbx"] = pkg
import sbx.harden as h, sbx.seccomp as sc
h.unshare(h.CLONE_NEWNET | h.CLONE_NEWIPC | h.CLONE_NEWUTS)
h.set_limits(cpu_s=11, address_space=h.vm_size() + (512 << 20), fsize=64 << 20, nproc=16)
h.prctl(h.PR_SET_NO_NEW_PRIVS, 1)
abi = h.landlock_abi()
h.landlock_restrict(h.landlock_ruleset(READ, ["/dev/null"], deny_tcp=True, abi=abi))
h.drop_privileges(60999)  # below every sandbox uid range (agentrl.sandbox.pool.UID_BASE)
sc.seccomp_install(sc.seccomp_program())
src = sys.stdin.read()
ns = {}
exec(src, ns)
print(json.dumps(ns["grade"](Rec(final_answer="4"), {"answer": "4"})))
"""
PRELUDE = "class Rec(dict):\n    __getattr__ = dict.__getitem__\n"


def fresh_call(read: list[str]) -> float:
    code = PRELUDE + FRESH.replace("HARDEN", repr(HARDEN)).replace("READ", repr(read))
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], input=GRADER.encode(), capture_output=True,
                         env={}, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.decode()[-500:])
    return float(out.stdout)


TICK = os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            todo += [int(c) for c in open(f"/proc/{p}/task/{p}/children").read().split()]
        except OSError:
            pass
    return out


def cpu_seconds(pids: list[int]) -> float:
    """CPU of this process and its reaped children, plus the given processes, their live descendants (a
    zygote's forking templates) and everything those reaped (the per-call children)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    for pid in {d for p in pids for d in _descendants(p)}:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / TICK
        except OSError:
            pass
    return total


def rate(fn, calls: int, threads: int) -> float:
    counter = iter(range(calls))
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            fn()

    ts = [threading.Thread(target=loop) for _ in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return calls / (time.perf_counter() - start)


def zygote_pids(sb: Sandbox) -> list[int]:
    return [w.proc.pid for p in sb._pools.values() for w in p.workers if w.alive()]


def measure_costs(calls: int, rounds: int, threads: int) -> None:
    """CPU per trivial grader call with every measure on, and with each one switched off in turn."""
    sample, item = {"final_answer": "4 "}, {"answer": "4"}
    configs = [("all on", "")] + [(f"without {m}", m) for m in MEASURES]
    boxes = {}
    try:
        for name, off in configs:
            os.environ["AGENTRL_SANDBOX_BENCH_OFF"] = off  # read by the zygotes as they start
            box = Sandbox(size=threads)
            assert box.run_grader(GRADER, "bench.py", sample, item) == 1.0
            checks = box._pool("grader").any_hello()["report"]
            assert all(not checks.get(m, [False])[0] for m in ([off] if off else [])), (off, checks.get(off))
            boxes[name] = (box, zygote_pids(box))
    finally:
        os.environ.pop("AGENTRL_SANDBOX_BENCH_OFF", None)
    cost: dict[str, list[float]] = {name: [] for name, _ in configs}
    for r in range(rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]  # no config always first or last
        for name, _ in order:
            box, pids = boxes[name]
            c0 = cpu_seconds(pids)
            rate(lambda: box.run_grader(GRADER, "bench.py", sample, item), calls, threads)
            cost[name].append((cpu_seconds(pids) - c0) / calls)
    base = statistics.median(cost["all on"])
    print(f"cost of each measure (CPU per trivial grader call, all processes, {rounds} x {calls} calls each, "
          f"interleaved; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    for name, _ in configs:
        med = statistics.median(cost[name])
        spread = " ".join(f"{c * 1e3:.2f}" for c in cost[name])
        saved = "" if name == "all on" else f" -> the measure costs {(base - med) * 1e3:+.2f} ms per call"
        print(f"  {name:<22} {med * 1e3:.2f} ms (rounds: {spread}){saved}")
    print("  request ids on replies and the checked limits: one integer in each JSON header and a few comparisons "
          "on the host per call (not switchable)")
    for box, _ in boxes.values():
        box.close()


# The channel left open: page-cache residency read by timing (sandbox/README.md). The sender can only bring
# pages in (reading); fadvise, MADV_COLD/PAGEOUT, mincore, cachestat and RWF_NOWAIT are denied. Pages start
# out of the cache (the host evicts them, as a file no one has read yet). Both sides map the file with
# MADV_RANDOM (no readahead) and the receiver times its first touch of each page: a major fault or not.
CACHE_SENDER = """
import ctypes, mmap, os, sys
bits = sys.stdin.read().strip()
fd = os.open(PATH, os.O_RDONLY)
m = mmap.mmap(fd, len(bits) * 4096, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_RANDOM)
for i, b in enumerate(bits):
    if b == '1':
        m[i * 4096]
print('sent')
"""
CACHE_RECEIVER = """
import mmap, os, time
fd = os.open(PATH, os.O_RDONLY)
m = mmap.mmap(fd, PAGES * 4096, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_RANDOM)
out = []
t0 = time.perf_counter()
for i in range(PAGES):
    t = time.perf_counter_ns()
    m[i * 4096]
    out.append((time.perf_counter_ns() - t) // 100)
print(time.perf_counter() - t0, *out)
"""


def stdout_of(sb: Sandbox, code: str, stdin: str = "") -> str:
    """What model code printed (the path run_tests takes, without a verdict)."""
    from agentrl.sandbox import verdicts

    header, blobs, _ = verdicts.plan({"type": "stdio", "stdin": stdin, "expected_stdout": ""}, 1 << 20)
    header.update(op="test", timeout=30.0, memory_mb=512)
    status, got = sb._pool("code").call(header, [code.encode()] + blobs, 35.0)
    assert status.get("exit") == 0, status
    return got[1].decode()


def residual_page_cache(sb: Sandbox, pages: int = 1024, rounds: int = 3) -> None:
    import secrets
    import sysconfig

    path = Path(sysconfig.get_paths()["purelib"]) / f"_agentrl_bench_{secrets.token_hex(4)}.bin"
    path.write_bytes(os.urandom(pages * 4096))
    errors, bits, seconds, lat1, lat0 = 0, 0, 0.0, [], []
    try:
        for _ in range(rounds):
            fd = os.open(path, os.O_RDONLY)
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the host may; a call may not
            os.close(fd)
            message = "".join(secrets.choice("01") for _ in range(pages))
            assert stdout_of(sb, CACHE_SENDER.replace("PATH", repr(str(path))), message).strip() == "sent"
            got = stdout_of(sb, CACHE_RECEIVER.replace("PATH", repr(str(path))).replace("PAGES", str(pages))).split()
            seconds += float(got[0])
            times = [int(x) / 10 for x in got[1:]]  # microseconds
            for b, t in zip(message, times):
                (lat1 if b == "1" else lat0).append(t)
            bits += pages
    finally:
        path.unlink()
    # the receiver's best threshold (optimistic for the attacker), chosen after the fact
    best = min(sorted(set(lat1 + lat0)), key=lambda th: sum(t > th for t in lat1) + sum(t <= th for t in lat0))
    errors = sum(t > best for t in lat1) + sum(t <= best for t in lat0)
    p = errors / bits
    import math
    h = 0.0 if p in (0, 1) else -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    print(f"residual page-cache timing channel ({rounds} x {pages} pages, one bit per page and use, pages brought in "
          f"only): cached touch median {statistics.median(lat1):.1f} us, uncached {statistics.median(lat0):.1f} us, "
          f"bit error rate {p:.3f} at the best threshold ({best:.1f} us), receiver {bits / seconds:.0f} raw bits/s, "
          f"capacity {(1 - h) * bits / seconds:.0f} bits/s while uncached pages last | load {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--fresh-calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--measure-calls", type=int, default=2000)
    ap.add_argument("--measure-rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0,
                    help="sandbox workers and client threads (default: as many as cores, at least 2); the "
                         "cpu-bound rate is always per core")
    args = ap.parse_args()
    cores = max(2, os.cpu_count() or 2)
    threads = args.workers or cores
    sb = Sandbox(size=threads)
    sample, item = {"final_answer": "4 "}, {"answer": "4"}
    heavy = "import math_verify\n" + GRADER
    t0 = time.perf_counter()
    assert sb.run_grader(GRADER, "bench.py", sample, item) == 1.0
    assert sb.run_grader(heavy, "bench_heavy.py", sample, item) == 1.0
    print(f"workers started (light, and heavy with sympy/math_verify/numpy pre-imported) in "
          f"{time.perf_counter() - t0:.1f} s")
    # The training path: a reward file loaded by name as `agentrl train` does (Reward -> process-wide sandbox).
    reward_file = Path(tempfile.mkdtemp()) / "bench_reward.py"
    reward_file.write_text(GRADER)
    reward = load_reward(str(reward_file))
    assert reward.sandboxed and reward(sample, item) == 1.0
    zpids = zygote_pids(sb)
    base = sys.base_prefix + "/lib"
    read = [os.path.realpath(base), "/usr/lib", "/lib", "/lib64"]
    assert fresh_call(read) == 1.0
    print(sb.isolation_report().summary())
    print(f"threads: {threads}, load average: {os.getloadavg()[0]:.2f}")
    zy, fr, hv, zc, fc, tr = [], [], [], [], [], []
    for r in range(args.rounds):
        c0 = cpu_seconds(zpids)
        z = rate(lambda: sb.run_grader(GRADER, "bench.py", sample, item), args.calls, threads)
        c1 = cpu_seconds(zpids)
        f = rate(lambda: fresh_call(read), args.fresh_calls, threads)
        c2 = cpu_seconds(zpids)
        h = rate(lambda: sb.run_grader(heavy, "bench_heavy.py", sample, item), args.calls // 3, threads)
        t = rate(lambda: reward(sample, item), args.calls // 3, threads)
        tr.append(t)
        zc.append((c1 - c0) / args.calls)
        fc.append((c2 - c1) / args.fresh_calls)
        zy.append(z)
        fr.append(f)
        hv.append(h)
        print(f"round {r + 1}: zygote {z:6.1f} calls/s ({zc[-1] * 1e3:.2f} ms CPU/call) | fresh isolated process "
              f"{f:5.1f} calls/s ({fc[-1] * 1e3:.1f} ms CPU/call) | ratio {z / f:5.1f}x | heavy-zygote grader "
              f"{h:6.1f} calls/s | reward file via load_reward {t:6.1f} calls/s | load {os.getloadavg()[0]:.2f}")
    zm, fm, hm = statistics.median(zy), statistics.median(fr), statistics.median(hv)
    zcm, fcm = statistics.median(zc), statistics.median(fc)
    print(f"median wall rate: zygote {zm:.1f} calls/s, fresh {fm:.1f} calls/s, ratio {zm / fm:.1f}x; "
          f"grader importing math_verify {hm:.1f} calls/s; reward file via load_reward {statistics.median(tr):.1f} calls/s")
    print(f"median CPU per call: zygote {zcm * 1e3:.2f} ms, fresh {fcm * 1e3:.1f} ms -> cpu-bound rate on {cores} "
          f"idle cores: zygote {cores / zcm:.0f} calls/s, fresh {cores / fcm:.0f} calls/s, ratio {fcm / zcm:.1f}x")
    print(f"targets (>= 1000 calls/s, >= 10x): wall rate {'MET' if zm >= 1000 and zm / fm >= 10 else 'NOT MET'} "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores); cpu-bound rate "
          f"{'MET' if cores / zcm >= 1000 and fcm / zcm >= 10 else 'NOT MET'}")
    # Model code: a test judged on this side (`assert f(x) == literal`: one process) against tests run in two
    # processes, plain data between: HumanEval's `check(candidate)`, and a probe with a comparison inside,
    # which the plain-data rule moved there (its cost is the difference to the first line).
    code = "def double(x):\n    return 2 * x\n"
    eq = [{"type": "assert", "code": "assert double(2) == 4"}]
    inside = [{"type": "assert", "code": "assert round(double(2) - 4, 9) == 0"}]
    opaque = [{"type": "assert", "code": "def check(candidate):\n    assert candidate(2) == 4\n\ncheck(double)\n"}]
    for name, tests in (("eq-literal assert (one process)", eq),
                        ("comparison inside the probe (two processes)", inside),
                        ("opaque assert (two processes)", opaque)):
        assert sb.run_tests(code, tests)[0].passed
        n = max(args.calls // 6, 50)
        r = rate(lambda: sb.run_tests(code, tests), n, threads)
        print(f"model code, {name}: {r:6.1f} tests/s | load {os.getloadavg()[0]:.2f}")
    residual_page_cache(sb)
    sb.close()
    if args.measure_rounds:
        measure_costs(args.measure_calls, args.measure_rounds, threads)


if __name__ == "__main__":
    main()
