"""Host memory: keep what a training step frees for the next step.

Every step frees and reallocates activations of about the same sizes. glibc's malloc hands freed
memory at the top of its heap back to the kernel once it exceeds the trim threshold, so the next
step takes it back page by page, each page zeroed by the kernel: thousands of page faults per step
on the CPU benchmark. Fixing the thresholds keeps that memory in the process, as the CUDA caching
allocator does for GPU memory and as PyTorch's CPU performance guide achieves by preloading jemalloc
or tcmalloc: far fewer page faults, more useful tokens/s, peak memory unchanged (measured:
bench/RESULTS.md, "Figures from code comments", Host memory). Blocks over 32 MiB (checkpoint staging
of big tensors) are still mapped and unmapped directly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 1 << 30  # keep up to 1 GiB of freed heap
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit; fixing it stops its adaptive resizing


def retain_freed_memory() -> bool:
    """Set glibc's malloc thresholds for a training process. Returns whether they were set:
    not on other C libraries, and not when the user tunes malloc through MALLOC_*_ variables
    (their settings win)."""
    if any(name.startswith("MALLOC_") and name.endswith("_") for name in os.environ):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None)
    if mallopt is None:  # not glibc
        return False
    done = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and done
    if not done:
        log.warning("malloc thresholds not set; training works, with more page faults")
    return done
