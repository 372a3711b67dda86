"""agentrl.malloc: in a tuned process glibc keeps large freed blocks on the heap, and gives them back on release."""

import os
import subprocess
import sys

CODE = """
import ctypes, sys
from agentrl import malloc
tuned = malloc.tune()
libc = ctypes.CDLL('libc.so.6'); libc.malloc.restype = ctypes.c_void_p; libc.free.argtypes = [ctypes.c_void_p]
def heap():
    lo, hi = [l for l in open('/proc/self/maps') if l.rstrip().endswith('[heap]')][0].split()[0].split('-')
    return int(lo, 16), int(hi, 16)
def rss():
    return int([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1]) << 10
blocks = [libc.malloc(16 << 20) for _ in range(8)]
for b in blocks:
    ctypes.memset(b, 1, 16 << 20)
lo, hi = heap()
on_heap = all(lo <= b < hi for b in blocks)
for b in blocks:
    libc.free(b)
kept = rss()
malloc.release()
print(tuned, on_heap, (kept - rss()) >> 20)
"""


def _run(**env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "AGENTRL_MALLOC"}
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env={**clean, **env}, check=True)
    tuned, on_heap, released_mib = out.stdout.split()
    return tuned == "True", on_heap == "True", int(released_mib)


def test_a_tuned_process_keeps_large_blocks_on_the_heap_and_gives_them_back_on_release():
    tuned, on_heap, released = _run()
    assert tuned and on_heap  # 16 MiB blocks from the heap, so a freed one is served again without new pages
    assert released >= 100  # the 128 MiB freed stayed in the process until release() gave it back


def test_agentrl_malloc_default_leaves_glibc_alone():
    tuned, on_heap, released = _run(AGENTRL_MALLOC="default")
    assert not tuned and not on_heap  # glibc's own choice: a fresh mapping per large block, unmapped on free
    assert released < 16
