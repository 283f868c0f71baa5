"""Running a script in a new Python process whose C library starts with its default
heap settings, for tests about what a process's history does to its kernels."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# A Winograd convolution, whose transformed tiles live on the heap: a workload spec.
WINOGRAD_SPEC = (
    '{"op": "conv2d_winograd_nchw", "args": {"batch": 1, "in_channels": 64, "height": 56,'
    ' "width": 56, "out_channels": 64, "padding": 1, "tile_size": 4}}'
)


def run_fresh(script: str, *args: str) -> str:
    """Run ``script`` (indented as it likes) with ``args`` in a new process, without
    glibc's ``MALLOC_*`` variables; return what it printed. Fails on a non-zero exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
