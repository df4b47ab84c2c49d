"""The C heap under long CPU scoring runs: freed batch-sized tensors kept for reuse instead of handed back.

glibc's ``malloc`` maps an allocation above its mmap threshold (128 KB at first, raised on the fly up to 32 MB)
afresh from the kernel and unmaps it when freed, and trims the heap's free top back to the kernel; every new
mapping is then zeroed page by page on first touch. A masked-LM scoring pass allocates tensors of 1-30 MB per layer
and batch (the feed-forward's 2,048 x 1,536, the vocabulary logits), so on a 2-core CPU a bfloat16 BLiMP pass spent
10-15% of its time in those page faults (``docs/benchmarks.md``). ``keep_freed_memory`` sets the threshold to its
32 MB ceiling and the trim threshold to 256 MB (``mallopt``), once per process, the first time a scorer runs on a
CPU: the heap then holds up to about that much freed memory for the next batch. Nothing else changes; on a C library
other than glibc it does nothing. ``BERTPROBE_KEEP_FREED_MEMORY=0`` leaves the heap as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's ceiling for it (HEAP_MAX_SIZE / 2 on 64-bit)
TRIM_THRESHOLD = 256 * 1024 * 1024


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once: the answer is kept); True when they are set."""
    if os.environ.get("BERTPROBE_KEEP_FREED_MEMORY", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def _glibc() -> ctypes.CDLL | None:
    """The process's C library where it is glibc (it has ``gnu_get_libc_version``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc
