"""``tensortune serve`` as a process of its own on a free port, for tests that need
what only a whole process shows: its memory, how it ends on a signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serve_process(db_url: str, *arguments: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The running server and its base URL; it gets SIGTERM when the block ends (a test
    may send it first) and is killed if it has not ended a minute later."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "tuner.cli.main", "serve", "--url", db_url, "--port", "0"]
    running = subprocess.Popen([*command, *arguments], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert running.stdout is not None
        address = next(
            line.split("running on ")[1].split()[0]
            for line in running.stdout
            if "running on http://" in line
        )
        # The output is read on, so that the server never blocks on a full pipe.
        threading.Thread(target=running.stdout.read, daemon=True).start()
        yield running, address
    finally:
        if running.poll() is None:
            running.send_signal(signal.SIGTERM)
        try:
            running.wait(timeout=60)
        finally:
            running.kill()
            running.wait()
