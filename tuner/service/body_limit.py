"""An ASGI middleware that refuses request bodies over a size with 413, whether the
client declares the size (``Content-Length``) or streams the body in chunks: a
streamed body is counted as it is read and refused once it passes the limit, before
any route sees it."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        seen = 0
        refused = False

        async def counting() -> Message:
            """The body as it comes; past the limit, the 413 goes out and the app is
            told the client left, which ends its reading."""
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes and not refused:
                refused = True
                await self._refuse(send)
            return {"type": "http.disconnect"} if refused else message

        async def unless_refused(message: Message) -> None:
            if not refused:
                await send(message)

        try:
            await self.app(scope, counting, unless_refused)
        except Exception:
            if not refused:
                raise  # after a refusal the app's own complaint has no one to go to

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"the body is over {self.max_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
