"""glibc's allocator set for PyTorch on the CPU: large tensors reuse freed memory instead of fresh pages.

    from agentrl import malloc
    malloc.tune()        # this process (mallopt), once: the CPU rollout's server and the warm-up call it
    ...                  # a batch of generation
    malloc.release()     # give the heap's free memory back (malloc_trim) once the batch is done

By default glibc serves a large allocation with a fresh ``mmap`` and returns it with ``munmap`` when freed, so a
KV cache that grows by one token a step, or a training step's activations, come back as new pages every time, and
the kernel zeroes and maps each one. Measured here (AMD EPYC, 2 cores, SmolLM2-135M, 32 sequences of a 470-token
prompt, 30 tokens each): 37.5 s with 32.1 s of it in the kernel by default; 20.6 s and 3.0 s with allocations up to
32 MiB kept on the heap (``M_MMAP_THRESHOLD``, glibc's largest allowed) and freed memory kept (``M_TRIM_THRESHOLD``);
20.2 s and 1.4 s with ``M_TOP_PAD`` as well. The cost: a process keeps its peak heap instead of returning it, so
the rollout gives it back after each batch (:func:`release`), and only the processes that generate are tuned: a
first SmolLM2 run with the settings in every verl process lost its rollout server and agent-loop worker to Ray's
memory monitor during the first update (whether the kept heaps caused it was not measured).

``AGENTRL_MALLOC=default`` leaves glibc as it is; a ``MALLOC_*_`` variable already set is the user's and wins.
Elsewhere than glibc (macOS, musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import os
from typing import Mapping

# glibc's largest allowed M_MMAP_THRESHOLD (64-bit): a block above it always gets fresh pages, whatever is set
LARGEST_HEAP_BLOCK = 32 << 20
# glibc's names for these settings, read once at a process's start (mallopt's M_TRIM_THRESHOLD = -1,
# M_TOP_PAD = -2, M_MMAP_THRESHOLD = -3 set the same in a running process)
SETTINGS = {"MALLOC_TRIM_THRESHOLD_": (-1, 1 << 30), "MALLOC_TOP_PAD_": (-2, 256 << 20),
            "MALLOC_MMAP_THRESHOLD_": (-3, LARGEST_HEAP_BLOCK)}
_done = False


def wanted(env: Mapping[str, str]) -> bool:
    return (env.get("AGENTRL_MALLOC") or "").strip().lower() != "default"


def tune() -> bool:
    """Apply the settings to this process (glibc only, once); True when they are in force."""
    global _done
    if _done or not wanted(os.environ):
        return _done
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    for name, (param, value) in SETTINGS.items():
        if name not in os.environ:  # a value set at start-up is already in force
            mallopt(param, value)
    _done = True
    return True


def release() -> None:
    """Return the heap's free memory to the system (``malloc_trim(0)``) in a tuned process."""
    if _done:
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass
