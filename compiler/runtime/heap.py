"""Serving kernels' heap temporaries from memory the process has already touched.

A kernel allocates its large temporaries (a Winograd convolution's transformed tiles,
a padded input) on every call and frees them before it returns. With glibc's
defaults a block over 128 KiB is mapped fresh from the system, the threshold then
grows to the largest block freed, and freed memory at the heap's top goes back to the
system once it passes twice that. A kernel with several temporaries can free more
than that on every call, and then every call writes to pages the process has just
given back: one page fault per 4 KiB. On ``-mcpu=znver4`` a Winograd F(4x4, 3x3)
convolution of 64 channels at 56x56 took 850-17,000 faults per timed loop and 4.9 ms
a call that way, none and 3.5 ms otherwise; ResNet-18's tuned Winograd kernels timed
up to 1.8x slower in the processes where it happened.

So before the first kernel is handed out, a glibc process is told to serve blocks up
to ``MMAP_THRESHOLD_BYTES`` from its heap and to give freed heap memory back only when
more than ``TRIM_THRESHOLD_BYTES`` lies free at the top: a freed temporary's pages
serve the next call, as a workspace pool's would. The cost is memory kept after a
peak, up to that much. A threshold the user set through glibc's environment variables
is left as it is, and so is a C library without ``mallopt``.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable

MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's largest on 64-bit machines
TRIM_THRESHOLD_BYTES = 512 << 20
# mallopt's parameter numbers (malloc.h), and the variables that set them at start-up.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_SETTINGS = (
    (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES, "MALLOC_MMAP_THRESHOLD_"),
    (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES, "MALLOC_TRIM_THRESHOLD_"),
)

_lock = threading.Lock()
_settled = False


def keep_temporaries_in_heap() -> None:
    """Set the thresholds, once per process (see the module's docstring)."""
    global _settled
    with _lock:
        if _settled:
            return
        _settled = True
        mallopt = _mallopt()
        if mallopt is None:
            return
        for parameter, value, variable in _SETTINGS:
            if variable not in os.environ:
                mallopt(parameter, value)


def _mallopt() -> Callable[[int, int], int] | None:
    """The process's own ``mallopt`` (no library search, which would start a
    subprocess), or None where its C library has none."""
    try:
        function = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int]
    function.restype = ctypes.c_int
    return function
