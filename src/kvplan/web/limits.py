"""ASGI middleware: read each request body whole, under a size cap and a deadline, before the app.

Over ``max_bytes`` the answer is 413, whether the size was declared (Content-Length) or the body
came chunked; a body not complete within ``timeout_s`` of its headers is answered 408. Both close
the connection. The app then reads the body from memory, so no body parser between here and the
routes can turn either limit into another status.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

Scope = dict[str, Any]


class BodyGuard:
    """The whole body, at most ``max_bytes``, within ``timeout_s``; else 413 or 408."""

    def __init__(self, app: Any, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        try:
            body = await self._read(receive)
        except _TooLarge:
            await refuse(send, 413, f"request body over {self.max_bytes} bytes")
            return
        except TimeoutError:
            await refuse(send, 408, f"request body not received within {self.timeout_s:g} s")
            return
        if body is None:  # the client left before its body was complete
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Any) -> bytes | None:
        chunks: list[bytes] = []
        seen, end = 0, time.monotonic() + self.timeout_s
        while True:
            message = await asyncio.wait_for(receive(), max(0.0, end - time.monotonic()))
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """A receive that gives the buffered body once, then waits on the real one (disconnect)."""
    given = False

    async def replay() -> Any:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def refuse(send: Any, status: int, detail: str, headers: tuple[tuple[bytes, bytes], ...]
                 = ()) -> None:
    """A one-line JSON error (the 422 body's shape) that also closes the connection."""
    payload = json.dumps({"detail": detail, "field": None}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(payload)).encode()),
                            (b"connection", b"close"), *headers]})
    await send({"type": "http.response.body", "body": payload})


class _TooLarge(Exception):
    """The body passed the cap mid-stream."""
