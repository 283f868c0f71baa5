"""The body of a local worker process:
``python -m workers.child ROLE READ_FD WRITE_FD HOOK``.

ROLE ``build`` answers ``build`` requests with the build function HOOK names; ROLE
``run`` answers ``prepare`` and ``measure`` with a measurer of the class HOOK names
(a "module:attribute" name, see ``workers.base.load_hook``). The process ends when
the parent closes its end of the request pipe, or when the parent itself is gone (a
watchdog thread notices), so a child never outlives the process that owns it, even
one stuck in a hung kernel. A parent that is gone ends the child quietly: its work
has nobody to go to, and a traceback about a broken pipe would only alarm.
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

from workers.base import BuildResult, Candidate, MeasureConfig, load_hook
from workers.process import receive, send

PARENT_CHECK_SECONDS = 1.0


def main(argv: list[str]) -> int:
    role, read_fd, write_fd, hook = argv
    if role not in ("build", "run"):
        raise SystemExit(f"workers.child: role must be 'build' or 'run', got {role!r}")
    requests = Connection(int(read_fd), writable=False)
    replies = Connection(int(write_fd), readable=False)
    _watch_parent(os.getppid())
    handle = _builder(load_hook(hook)) if role == "build" else _runner(load_hook(hook))
    while True:
        try:
            header, payload = receive(requests)
        except (EOFError, ConnectionResetError):
            return 0
        reply, reply_payload = handle(header, payload)
        try:
            send(replies, reply, reply_payload)
        except (BrokenPipeError, ConnectionResetError):
            return 0


Message = tuple[dict[str, Any], bytes | None]  # a JSON header and maybe a payload
Handler = Callable[[dict[str, Any], bytes | None], Message]


def _builder(build_candidate: Callable[[Candidate], BuildResult]) -> Handler:
    def handle(
        header: dict[str, Any], payload: bytes | None
    ) -> tuple[dict[str, Any], bytes | None]:
        result = build_candidate(Candidate.from_json(header["candidate"]))
        return result.header(), None if result.artifact is None else result.artifact.library

    return handle


def _runner(measurer_class: Callable[..., Any]) -> Handler:
    measurer = measurer_class(host=socket.gethostname())

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
