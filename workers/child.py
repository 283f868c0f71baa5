"""The body of a local worker process: ``python -m workers.child ROLE READ_FD WRITE_FD``.

ROLE ``build`` answers ``build`` requests; ROLE ``run`` answers ``prepare`` and
``measure``. The environment is read here, once: whether the test-only fault hook
is on. The process ends when the parent closes its end of the request pipe, or
when the parent itself is gone (a watchdog thread notices), so a child never
outlives the process that owns it, even one stuck in a hung kernel.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from workers.base import BuildResult, Candidate, MeasureConfig
from workers.faults import faults_enabled
from workers.process import receive, send

PARENT_CHECK_SECONDS = 1.0


def main(argv: list[str]) -> int:
    role, read_fd, write_fd = argv
    if role not in ("build", "run"):
        raise SystemExit(f"workers.child: role must be 'build' or 'run', got {role!r}")
    faults = faults_enabled()
    requests = Connection(int(read_fd), writable=False)
    replies = Connection(int(write_fd), readable=False)
    _watch_parent(os.getppid())
    handle = _builder(faults) if role == "build" else _runner(faults)
    while True:
        try:
            header, payload = receive(requests)
        except EOFError:
            return 0
        reply, reply_payload = handle(header, payload)
        send(replies, reply, reply_payload)


Message = tuple[dict[str, Any], bytes | None]  # a JSON header and maybe a payload
Handler = Callable[[dict[str, Any], bytes | None], Message]


def _builder(faults: bool) -> Handler:
    from workers.build import build_candidate

    def handle(
        header: dict[str, Any], payload: bytes | None
    ) -> tuple[dict[str, Any], bytes | None]:
        result = build_candidate(Candidate.from_json(header["candidate"]), faults=faults)
        return result.header(), None if result.artifact is None else result.artifact.library

    return handle


def _runner(faults: bool) -> Handler:
    from workers.measure import Measurer

    measurer = Measurer(faults=faults, host=socket.gethostname())

    def handle(
        header: dict[str, Any], payload: bytes | None
    ) -> tuple[dict[str, Any], bytes | None]:
        config = MeasureConfig.from_json(header["config"])
        if header["op"] == "prepare":
            candidate = Candidate.from_json(header["candidate"])
            return {"error": measurer.prepare(candidate, config)}, None
        build = BuildResult.from_header(header["build"], payload)
        return measurer.measure(build, config).to_json(), None

    return handle


def _watch_parent(parent: int) -> None:
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
