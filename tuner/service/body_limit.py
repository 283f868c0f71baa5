"""An ASGI middleware that refuses request bodies over a size with 413, whether the
client declares the size (``Content-Length``) or streams the body in chunks: a
streamed body is counted as it is read and refused once it passes the limit, before
any route sees it. A path may have a limit of its own (model files are larger than any
other body)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(
        self, app: ASGIApp, max_bytes: int, by_path: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.by_path = dict(by_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.by_path.get(scope["path"], self.max_bytes)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._refuse(send, limit)
            return
        seen = 0
        refused = False

        async def counting() -> Message:
            """The body as it comes; past the limit, the 413 goes out and the app is
            told the client left, which ends its reading."""
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit and not refused:
                refused = True
                await self._refuse(send, limit)
            return {"type": "http.disconnect"} if refused else message

        async def unless_refused(message: Message) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, counting, unless_refused)
        except Exception:
            if not refused:
                raise  # after a refusal the app's own complaint has no one to go to

    async def _refuse(self, send: Send, limit: int) -> None:
        body = json.dumps({"detail": f"the body is over {limit} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
