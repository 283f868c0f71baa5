"""Runs ``tensortune`` command lines one after another in one child process.

A fuzz test runs hundreds of command lines; starting Python and importing the
compiler, the tuner and the database for each would take most of the test's time.
The child imports them once and runs each command line through ``tuner.cli.main.main``,
so a command that kills its process (a signal) or hangs still ends only the child:
the test sees it, names the command line and starts a new child.

The child reads one JSON list of arguments per line on standard input, runs it, and
answers on its own pipe. Standard output is dropped; standard error, which the worker
processes a run starts share, goes to a file the test reads as the command's.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ESCAPED = -1000  # the exit code the child reports when an exception left main()


@dataclass(frozen=True)
class Outcome:
    """How one command line ended: its exit code (``ESCAPED`` when an exception left
    ``main``), everything written to standard error meanwhile, and, when the child
    died or hung, how."""

    code: int | None
    stderr: str
    fault: str | None = None


class CliServer:
    """One child process that runs command lines with ``env`` as its environment."""

    def __init__(self, env: dict[str, str], log: Path, timeout_s: float) -> None:
        self.env = env
        self.log = log
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[str] | None = None
        self._replies: int = -1
        self._read_offset = 0

    def run(self, argv: list[str]) -> Outcome:
        if self._process is None or self._process.poll() is not None:
            self._start()
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(argv) + "\n")
        self._process.stdin.flush()
        ready, _, _ = select.select([self._replies], [], [], self.timeout_s)
        reply = os.read(self._replies, 65536).decode() if ready else ""
        if not ready:
            self._stop()
            return Outcome(None, self._new_stderr(), f"no answer within {self.timeout_s:g} s")
        if not reply:
            returncode = self._process.wait()
            self._stop()
            return Outcome(returncode, self._new_stderr(), f"the process died ({returncode})")
        return Outcome(json.loads(reply)["code"], self._new_stderr())

    def close(self) -> None:
        self._stop()

    def _start(self) -> None:
        self._stop()
        read_end, write_end = os.pipe()
        log = self.log.open("a")
        self._process = subprocess.Popen(
            [sys.executable, __file__, str(write_end)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=self.env,
            text=True,
            pass_fds=(write_end,),
            start_new_session=True,
        )
        log.close()
        os.close(write_end)
        self._replies = read_end

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
            self._process = None
        if self._replies >= 0:
            os.close(self._replies)
            self._replies = -1

    def _new_stderr(self) -> str:
        with self.log.open("rb") as log:
            log.seek(self._read_offset)
            text = log.read()
        self._read_offset += len(text)
        return text.decode(errors="replace")


def _serve(reply_fd: int) -> None:
    os.set_inheritable(reply_fd, False)
    from tuner.cli.main import main

    for line in sys.stdin:
        argv = json.loads(line)
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        except BaseException:
            traceback.print_exc()
            code = ESCAPED
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(reply_fd, json.dumps({"code": code}).encode())


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
