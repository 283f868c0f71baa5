"""Child worker processes for the local backend, and the wire between them.

Each worker is a fresh Python process (``python -m workers.child ROLE``), not a
fork: the parent may hold OpenMP threads or LLVM state that a fork would copy
half-alive. Parent and child talk over a pair of pipes, one message per frame
(``multiprocessing.connection`` framing, nothing pickled): a JSON header, then,
when the header says so, one frame of raw bytes (a library). A candidate that
crashes or hangs takes down only its child, which the parent kills and replaces.

Each child runs in a process group of its own, so a Ctrl-C at the terminal (a SIGINT
to the foreground group) reaches only the parent, which decides what happens to the
work in flight; a child never prints a KeyboardInterrupt of its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import workers

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(workers.__file__)))


@dataclass(frozen=True)
class Reply:
    header: dict[str, Any]
    payload: bytes | None


@dataclass(frozen=True)
class Died:
    """The child exited before it replied; ``how`` says how (a signal, an exit code)."""

    how: str


@dataclass(frozen=True)
class TimedOut:
    seconds: float


Outcome = Reply | Died | TimedOut


def send(conn: Connection, header: Mapping[str, Any], payload: bytes | None = None) -> None:
    conn.send_bytes(json.dumps({**header, "has_payload": payload is not None}).encode())
    if payload is not None:
        conn.send_bytes(payload)


def receive(conn: Connection) -> tuple[dict[str, Any], bytes | None]:
    """One message; raises EOFError when the other side has gone."""
    header = json.loads(conn.recv_bytes())
    payload = conn.recv_bytes() if header.pop("has_payload") else None
    return header, payload


class WorkerProcess:
    """One child process of ``role`` ("build" or "run") running the code ``hook`` names
    (``workers.base.BUILD_FUNCTION`` or ``MEASURER``, or a stand-in), replaced on demand.

    ``prepared`` is the parent's note of which workloads the current child already
    holds a reference for, ``served`` of how many requests its owner counted; a
    fresh child starts with none. Every child, replacements included, gets the
    environment as it was when this object was made, with ``env`` on top. A
    replacement starts when the next request is sent, so a run that stops (Ctrl-C)
    does not start children only to end them.
    """

    def __init__(self, role: str, hook: str, env: Mapping[str, str] | None = None) -> None:
        self.role = role
        self.hook = hook
        self.prepared: set[str] = set()
        self.served = 0
        self._env = {**os.environ, **(env or {})}
        path = self._env.get("PYTHONPATH")
        self._env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, path]))
        self._running = False
        self._start()

    def _start(self) -> None:
        child_read, parent_write = os.pipe()
        parent_read, child_write = os.pipe()
        command = [sys.executable, "-m", "workers.child", self.role]
        command += [str(child_read), str(child_write), self.hook]
        try:
            self._process = subprocess.Popen(
                command,
                pass_fds=(child_read, child_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=self._env,
                process_group=0,
            )
        finally:
            os.close(child_read)
            os.close(child_write)
        self._requests = Connection(parent_write, readable=False)
        self._replies = Connection(parent_read, writable=False)
        self._running = True
        self._finalizer = weakref.finalize(self, _kill, self._process)

    @property
    def connection(self) -> Connection:
        """What ``multiprocessing.connection.wait`` waits on for this child's reply."""
        return self._replies

    def send(self, header: Mapping[str, Any], payload: bytes | None = None) -> bool:
        """Send a request (starting a replacement child first if one is due); False
        when the child is already gone."""
        if not self._running:
            self._start()
        try:
            send(self._requests, header, payload)
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def receive(self) -> Reply | Died:
        try:
            header, payload = receive(self._replies)
        except (EOFError, ConnectionResetError):
            return Died(self._exit_description())
        return Reply(header, payload)

    def call(self, header: Mapping[str, Any], payload: bytes | None, timeout_s: float) -> Outcome:
        """Send a request and wait for its reply, for at most ``timeout_s``. A child
        that died or timed out is replaced before this returns; so is one whose wait
        was interrupted (Ctrl-C), since its late reply would answer the next request."""
        try:
            if not self.send(header, payload):
                outcome: Outcome = Died(self._exit_description())
            elif not self._replies.poll(timeout_s):
                outcome = TimedOut(timeout_s)
            else:
                outcome = self.receive()
        except BaseException:
            self.replace()
            raise
        if not isinstance(outcome, Reply):
            self.replace()
        return outcome

    def replace(self) -> None:
        """Kill this child (if it still runs); a fresh one serves the next request."""
        if self._running:
            self._stop(kill=True)
        self.prepared = set()
        self.served = 0

    def close(self) -> None:
        if self._running:
            self._stop(kill=False)

    def _stop(self, kill: bool) -> None:
        self._requests.close()
        if kill:
            _kill(self._process)
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _kill(self._process)
        self._replies.close()
        self._finalizer.detach()
        self._running = False

    def _exit_description(self) -> str:
        try:
            code = self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code >= 0:
            return f"exited with code {code}"
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
