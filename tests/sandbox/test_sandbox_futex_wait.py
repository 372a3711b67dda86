"""Two tests of one solution running at once cannot meet on a shared futex, not even through the kernel's
own wakes: a thread's exit wakes its clear_child_tid address (set by `set_tid_address` or
`clone(CLONE_CHILD_CLEARTID)`) as a shared futex, which no seccomp rule on `futex` sees.

    test 1: a thread sets its clear_child_tid to a word of libc's text (a page of a file both tests map,
            so the futex key is (inode, offset)) and exits, again and again
    test 2: FUTEX_WAIT without FUTEX_PRIVATE_FLAG on the same word of its own libc: woken by test 1

The sandbox queues no shared waiter at all: a shared FUTEX_WAIT / FUTEX_WAIT_BITSET returns EAGAIN at once
(the value changed: callers look again), the futex2 calls are denied, private futexes work as before.
"""

from __future__ import annotations

SOLUTION = r'''
import ctypes, errno, sys, threading
role = sys.stdin.read().strip()
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
addr = ctypes.cast(libc.printf, ctypes.c_void_p).value & ~3  # the same (inode, offset) in both tests

class Timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]

def wait(op, where, value, seconds):
    r = libc.syscall(202, ctypes.c_void_p(where), op, value, ctypes.byref(Timespec(seconds, 0)), None,
                     ctypes.c_uint(0xFFFFFFFF))
    return "woken" if r == 0 else errno.errorcode[ctypes.get_errno()]

if role == "wake":
    def exit_waking_addr():
        libc.syscall(218, ctypes.c_void_p(addr))  # set_tid_address: the kernel wakes addr when we exit
    for _ in range(20):  # (each leaves its stack behind: glibc waits for a tid the kernel never clears)
        t = threading.Thread(target=exit_waking_addr)
        t.start()
        t.join()
    print("done")
else:
    value = ctypes.c_int.from_address(addr).value
    shared = [wait(0, addr, value, 3), wait(9, addr, value, 1)]       # FUTEX_WAIT, FUTEX_WAIT_BITSET
    own = ctypes.c_int(7)
    private = wait(0 | 128, ctypes.addressof(own), 7, 0)                # a private wait still waits
    start = libc.pthread_create                                       # pthread_join waits on a shared futex
    body = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _: None)
    tid = ctypes.c_ulong()
    joined = start(ctypes.byref(tid), None, body, None) == 0 and libc.pthread_join(tid, None) == 0
    print(*shared, private, joined)
'''


def test_a_thread_exit_wake_reaches_no_concurrent_test(sb):
    seen = {}

    def record(role):
        return lambda got, _: seen.setdefault(role, got.strip()) is None

    tests = [{"type": "stdio", "stdin": "wait", "expected_stdout": "\0", "equal": record("wait")},
             {"type": "stdio", "stdin": "wake", "expected_stdout": "\0", "equal": record("wake")}]
    sb.run_tests(SOLUTION, tests, timeout_per_test=10.0)
    assert seen == {"wait": "EAGAIN EAGAIN ETIMEDOUT True", "wake": "done"}, seen
