"""Per-call CPU cost, in microseconds, of the measures of sandbox issue 40, each alone in a fork loop.

    sudo .venv/bin/python benchmarks/bench_sandbox_micro.py [--forks 2000] [--rounds 3]

Each line forks `--forks` children that do one thing and exit, and reports the CPU (parent + children, user +
system) per fork above a child that does nothing: a fresh /dev/null description opened and closed (the zygote,
per call), a move into a cgroup v1 memory cgroup through a descriptor of its `cgroup.procs` (each call's child),
a stacked seccomp filter installed (each call's child: seccomp.child_seccomp_program), and the full deny filter
(seccomp.seccomp_program, once more on top of the one this process runs under, as a template does) run on
10,000 cheap syscalls (getppid: allowed at its first jump) and on 10,000 futex
wakes (the arguments checked). CPU time, not wall time: other jobs on the machine disturb it much less.
First it measures the floor of a fresh process per call (a fork of a Python process running a 3-line job and
exiting, no isolation; bare and with a grader template's imports), then splits a trivial grader call's CPU by process role (host, zygotes, templates, the calls' children),
then measures what a network namespace made for each call would cost (the kernel's teardown included).
Needs root (cgroups); Linux, x86_64.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import time

from agentrl.sandbox import cgroup, harden, seccomp

libc = ctypes.CDLL(None, use_errno=True)


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def fork_loop(forks: int, child) -> float:
    """CPU seconds per fork of a child that runs `child()` then exits."""
    start = cpu()
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            try:
                child()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    return (cpu() - start) / forks


def in_child_filtered(n: int, program: bytes, call) -> float:
    """CPU seconds per `call()` in a child under `program`, minus the same without it (per call)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        harden.prctl(harden.PR_SET_NO_NEW_PRIVS, 1)
        t0 = time.process_time()
        for _ in range(n):
            call()
        bare = time.process_time() - t0
        seccomp.seccomp_install(program)
        t0 = time.process_time()
        for _ in range(n):
            call()
        os.write(w, repr((time.process_time() - t0 - bare) / n).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(w)
    return float(os.read(r, 100))


TICK = os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (every process and kernel thread), from /proc/stat."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK  # less idle and iowait


def netns_cost(forks: int, rounds: int) -> None:
    """What a network namespace of its own per call would cost (not done: the worker's namespace outlives
    its calls, sandbox/README.md): forks whose child enters a new one and exits, against plain forks. The
    kernel tears a namespace down later, in a worker thread of its own, so beside this process's CPU the
    machine's busy CPU over each loop and a settling second after it is given (other jobs' CPU included,
    the same in both columns on average)."""
    per: dict[str, list[tuple[float, float]]] = {"plain fork": [], "fork + unshare(CLONE_NEWNET)": []}
    for _ in range(rounds):
        for name, fn in (("plain fork", lambda: None),
                         ("fork + unshare(CLONE_NEWNET)", lambda: harden.unshare(harden.CLONE_NEWNET))):
            busy = _machine_busy()
            own = fork_loop(forks, fn)
            time.sleep(1.0)  # the namespaces' teardown, queued to a kernel worker
            per[name].append((own, (_machine_busy() - busy) / forks))
    print(f"a network namespace per call ({rounds} x {forks} forks; load {os.getloadavg()[0]:.2f}), CPU per fork:")
    for name, values in per.items():
        own, machine = (statistics.median(v[i] for v in values) for i in (0, 1))
        print(f"  {name:<30} this process and its children {own * 1e6:7.0f} us (rounds "
              f"{', '.join(f'{v[0] * 1e6:.0f}' for v in values)}), the machine {machine * 1e6:7.0f} us (rounds "
              f"{', '.join(f'{v[1] * 1e6:.0f}' for v in values)})")


def _stat(pid: int) -> tuple[float, float]:
    """(own CPU, CPU of its reaped children) of a process, in seconds."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _roles(sb) -> dict[str, float]:
    """CPU so far by role: the host process, the zygotes, the template factories and templates (their own
    loops), and the calls' children (reaped by the templates)."""
    out = {"host": sum(getattr(resource.getrusage(resource.RUSAGE_SELF), f) for f in ("ru_utime", "ru_stime")),
           "zygotes": 0.0, "templates": 0.0, "calls' children": 0.0}
    for pool in sb._pools.values():
        for w in pool.workers:
            out["zygotes"] += _stat(w.proc.pid)[0]
            for c in _children(w.proc.pid):
                for t in [c, *_children(c)]:
                    own, reaped = _stat(t)
                    out["templates"] += own
                    out["calls' children"] += reaped if t != c or not _children(c) else 0.0
    return out


def split(calls: int, rounds: int) -> None:
    """Where a trivial grader call's CPU goes, by process role (one client thread, 2 workers)."""
    from agentrl.sandbox import Sandbox

    grader = "def grade(sample, item):\n    return 1.0 if sample.final_answer == item['answer'] else 0.0\n"
    sb = Sandbox(size=2)
    for _ in range(50):  # warm: templates started, grader compiled
        sb.run_grader(grader, "g.py", {"final_answer": "4"}, {"answer": "4"})
    per: dict[str, list[float]] = {}
    for _ in range(rounds):
        before, t0 = _roles(sb), time.perf_counter()
        for _ in range(calls):
            sb.run_grader(grader, "g.py", {"final_answer": "4"}, {"answer": "4"})
        wall, after = time.perf_counter() - t0, _roles(sb)
        for role in before:
            per.setdefault(role, []).append((after[role] - before[role]) / calls)
        per.setdefault("wall (one thread)", []).append(wall / calls)
    sb.close()
    print(f"where a trivial grader call's CPU goes ({rounds} x {calls} calls, one client thread; load "
          f"{os.getloadavg()[0]:.2f}), microseconds per call:")
    for role, values in per.items():
        print(f"  {role:<20} {statistics.median(values) * 1e6:8.0f} (rounds {', '.join(f'{v * 1e6:.0f}' for v in values)})")


_FLOOR_CHILD = r"""
import gc, json, os, resource, sys
if sys.argv[2] == "template":  # what a grader template holds before it serves: its imports, frozen, heap collapsed
    import agentrl.sandbox.child, agentrl.sandbox.template  # noqa: E401,F401
    from agentrl.sandbox import harden
    from agentrl.sandbox.policy import grader_globals
    grader_globals("grader.py", {}.get, False)
    gc.collect(); gc.freeze()
    harden.collapse_to_huge_pages(open("/proc/self/maps").read())
def grade(sample, item):
    return 1.0 if sample["final_answer"] == item["answer"] else 0.0
n, out = int(sys.argv[1]), []
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
start = cpu()
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        req = json.loads('{"sample": {"final_answer": "4"}, "item": {"answer": "4"}}')
        json.dumps({"score": grade(req["sample"], req["item"])})
        os._exit(0)
    os.waitpid(pid, 0)
print((cpu() - start) / n)
"""


def floor(forks: int, rounds: int) -> None:
    """The per-call process alone: CPU per fork of a child that decodes a small JSON job, grades it and exits, in
    (a) a bare interpreter (`python -I -S`, nothing imported) and (b) one holding what a grader template holds.
    No isolation, no zygote, no host round trip: what any design that gives each call a fresh copy of a Python
    process pays on this machine, set against the 2 x 1,000 / cores budget of 1,000 calls/s."""
    import subprocess
    import sys

    cores = os.cpu_count() or 1
    per: dict[str, list[float]] = {"bare interpreter (python -I -S)": [], "a grader template's process": []}
    for _ in range(rounds):
        for (name, values), flags, kind in zip(per.items(), (["-I", "-S"], ["-I"]), ("bare", "template")):
            out = subprocess.run([sys.executable, *flags, "-c", _FLOOR_CHILD, str(forks), kind], check=True,
                                 capture_output=True, text=True).stdout
            values.append(float(out.split()[-1]))
    print(f"the per-call process alone ({rounds} x {forks} forks, a 3-line JSON job, no isolation; load "
          f"{os.getloadavg()[0]:.2f}), CPU per call; 1,000 calls/s on {cores} cores allows {cores * 1000 / 1000:.0f} ms:")
    for name, values in per.items():
        print(f"  {name:<34} {statistics.median(values) * 1e6:8.0f} us (rounds "
              f"{', '.join(f'{v * 1e6:.0f}' for v in values)})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forks", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--split-calls", type=int, default=1000, help="calls per round of the split by role (0: skip)")
    ap.add_argument("--netns-forks", type=int, default=500, help="forks per round of the network namespace "
                    "cost (0: skip)")
    ap.add_argument("--floor-forks", type=int, default=1000, help="forks per round of the per-call process alone, "
                    "bare and as a template holds it (0: skip)")
    args = ap.parse_args()
    if args.floor_forks:
        floor(args.floor_forks, args.rounds)
    if args.split_calls:
        split(args.split_calls, args.rounds)
    if args.netns_forks:
        netns_cost(args.netns_forks, args.rounds)
    base, why = cgroup.find_base()
    cg = cgroup.MemoryCgroup(base, f"{os.getpid()}-bench") if base else None
    child_program, full = seccomp.child_seccomp_program(), seccomp.seccomp_program()
    fd = cg.procs_fd() if cg is not None else -1
    # Like a template: this process is under the deny filter already, so its children's costs are those of
    # a call's child (a first filter would also switch on speculation mitigations, which a template has).
    load = os.getloadavg()[0]  # before the filter, which denies sysinfo (glibc reads the load through it)
    harden.prctl(harden.PR_SET_NO_NEW_PRIVS, 1)
    seccomp.seccomp_install(full)
    futex_word = ctypes.c_int(0)
    cases = {
        "nothing (baseline)": lambda: None,
        "fresh /dev/null": lambda: os.close(os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)),
        "child seccomp filter": lambda: seccomp.seccomp_install(child_program),
    }
    if cg is not None:
        cases["move into the calls' cgroup"] = lambda: os.write(fd, b"0")
    else:
        print(f"no cgroup: {why}")
    per: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):  # interleaved, so that load changes hit every case alike
        for name, fn in cases.items():
            per[name].append(fork_loop(args.forks, fn))
    base_s = statistics.median(per["nothing (baseline)"])
    print(f"load average {load:.2f} (at the start); {args.rounds} x {args.forks} forks; CPU per fork:")
    for name, values in per.items():
        med = statistics.median(values)
        extra = "" if name.startswith("nothing") else f"  -> +{(med - base_s) * 1e6:.1f} us"
        print(f"  {name:<28} {med * 1e6:8.1f} us (rounds {', '.join(f'{v * 1e6:.0f}' for v in values)}){extra}")
    getppid = libc.getppid
    wake = lambda: libc.syscall(202, ctypes.byref(futex_word), 1 | 128, 1, 0, 0, 0)  # noqa: E731
    for name, call in (("getppid", getppid), ("futex wake (private)", wake)):
        us = statistics.median(in_child_filtered(10000, full, call) for _ in range(args.rounds)) * 1e6
        print(f"  deny filter on {name:<20} +{us:.3f} us a syscall")
    if cg is not None:
        cg.remove()


if __name__ == "__main__":
    main()
