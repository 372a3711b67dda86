"""A call's own descriptors, as its forked child sees them: the job it reads, the one result it sends.

    job = read_blobs(4, job_len)          # the marshal-encoded job the zygote wrote into memfd 4
    send({"value": {"float": "1.0"}})     # the call's single result, on descriptor RESULT_FD
    end_with_grader_error("print less")   # send a grader error and end the process now

child.py (what a call runs), policy.py (the globals a grader runs with) and template.py (which forks the
call) all use these, and none of the three needs another one for them: this module imports none of them.
"""

from __future__ import annotations

import json
import marshal
import os

from .protocol import write_all

RESULT_FD = 3


def read_blobs(fd: int, size: int):
    """The marshal-encoded value the zygote wrote into memfd `fd` (read from offset 0)."""
    data = os.pread(fd, size, 0)
    while len(data) < size:
        more = os.pread(fd, size - len(data), len(data))
        if not more:
            raise EOFError("job memfd is short")
        data += more
    return marshal.loads(data)


def send(obj: dict) -> None:
    """Write the call's result; the host believes nothing in it that it does not re-check."""
    try:
        write_all(RESULT_FD, json.dumps(obj).encode())
    except Exception:  # noqa: BLE001 - the result pipe is gone or the object is odd; the host sees no result
        pass


def end_with_grader_error(message: str) -> None:
    """End a grader's call now with `message` as its error (nothing the grader does can catch this)."""
    send({"grader_error": message})
    os._exit(0)
