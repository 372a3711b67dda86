"""The sandbox where the isolation is weaker: root without CAP_SYS_ADMIN, as in a default container.

Made real, not pretended: `setpriv` drops CAP_SYS_ADMIN from the bounding set of a child process, so
its sandbox cannot create namespaces. Landlock, seccomp, the uid drop, rlimits and cgroups still apply.
The report must say what is missing, grader code must still run (and still not read secrets), model
code must be refused unless the caller opts in, and with the opt-in no process the code started may
outlive the call even though there is no pid namespace to kill it with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = r'''
import json, os, sys
from agentrl.sandbox import Sandbox, SandboxError

def live(uid):
    """Processes of `uid` that are running (not exited and waiting to be reaped)."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                status = open(f"/proc/{name}/status").read()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields["Uid"].split()[0] == str(uid) and fields["State"].split()[0] not in "ZX":
                out.add(int(name))
    return out

LEAVER = ("import os, time\n"
          "for _ in range(3):\n"
          "    if os.fork() == 0:\n"
          "        os.setsid()\n"
          "        time.sleep(300)\n"
          "        os._exit(0)\n"
          "print('done')\n")
out = {}
sb = Sandbox(size=1)
try:
    report = sb.isolation_report()
    out["missing"] = report.missing()
    out["pid_ns"] = report.pid_ns.reason
    out["cgroups"] = report.cgroups.ok
    out["grade"] = sb.run_grader("def grade(sample, item):\n    return 1.0 if sample['a'] == item['b'] else 0.0\n",
                                 "g.py", {"a": 1}, {"b": 1})
    shadow = "def grade(sample, item):\n    return float(len(open('/etc/shadow').read()))\n"
    try:
        out["shadow"] = sb.run_grader(shadow, "s.py", {}, {})
    except SandboxError as e:
        out["shadow"] = e.cause
    try:
        sb.run_tests("print(1)", [{"type": "stdio", "stdin": "", "expected_stdout": "1"}])
        out["refused"] = None
    except SandboxError as e:
        out["refused"] = e.cause
    uid = sb._pools[("code", False)].workers[0].uid
    before = live(uid)
    [v] = sb.run_tests(LEAVER, [{"type": "stdio", "stdin": "", "expected_stdout": "done"}], allow_weak=True)
    out["leaver"] = v.kind
    out["survivors"] = sorted(live(uid) - before)
    [v] = sb.run_tests("print(2)", [{"type": "stdio", "stdin": "", "expected_stdout": "2"}], allow_weak=True)
    out["next_call"] = v.kind
finally:
    sb.close()
print(json.dumps(out))
'''


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv (util-linux)")
@pytest.mark.parametrize("loop", ["c", "python"])
def test_without_cap_sys_admin(loop):
    env = {**os.environ, "AGENTRL_SANDBOX_FORKSERVER": loop}
    env.pop("AGENTRL_SANDBOX_ALLOW_WEAK", None)
    proc = subprocess.run(["setpriv", "--bounding-set", "-sys_admin", "--", sys.executable, "-c", SCRIPT],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["missing"] == ["net_ns", "mount_ns", "pid_ns", "noatime", "pid_reset", "dev_readonly"], out
    # the report says how leftover processes are dealt with instead of the pid namespace
    how = "template's memory cgroup" if out["cgroups"] else "slot uid"
    assert f"processes a call leaves running are killed by the {how}" in out["pid_ns"], out["pid_ns"]
    assert out["grade"] == 1.0
    assert out["shadow"] == "exception", out  # PermissionError inside grade(): Landlock still applies
    assert out["refused"] == "weak_isolation", out
    assert out["leaver"] == "pass", out
    assert out["survivors"] == [], f"processes outlived the call: {out['survivors']}"
    assert out["next_call"] == "pass", out
