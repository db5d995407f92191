"""uvicorn under the server's limits: request headers within a deadline (uvicorn has no such
timeout: a socket that trickles a header line every few seconds was held forever), a header
size cap, a connection cap, and the short keep-alive for idle connections."""

from __future__ import annotations

import asyncio
from typing import Any

from kvplan.web.settings import WebSettings

SWITCH_INTERVAL_S = 0.001
"""How often a thread holding the GIL hands it over (Python's default: 5 ms). With two
simulations computing on their threads, light requests wait less for the event loop's turn:
under 40 queued simulations on a loaded 2-core machine, /api/models took median 0.094 s (max
0.63 s) at 5 ms and 0.041 s (max 0.45 s) at 1 ms (tests/test_web_load.py)."""


def guarded_protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers are late.

    The clock starts when the connection opens and again when a response completes (the next
    request's headers are then due); it stops when a request's headers are parsed (the body has
    its own deadline, limits.BodyGuard).
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:  # a request's headers arrived
                self._disarm()

        def on_response_complete(self) -> None:
            self._arm()  # before super(): a pipelined request parsed there disarms it
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout_s, self._late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _late(self) -> None:
            self._header_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11


def server(host: str, port: int, settings: WebSettings, *, log: bool = True) -> Any:
    """A uvicorn Server for the app under these limits (``.run()`` serves until stopped)."""
    import uvicorn

    from kvplan.web.app import create_app

    config = uvicorn.Config(
        create_app(settings), host=host, port=port, log_level="info" if log else "warning",
        http=guarded_protocol(settings.header_timeout_s), timeout_keep_alive=5,
        h11_max_incomplete_event_size=settings.max_header_bytes,
        limit_concurrency=settings.max_connections)
    return uvicorn.Server(config)


def check_listen(host: str, port: int) -> None:
    """InputError (one line) when HOST:PORT cannot be listened on: a name that does not
    resolve, an address of another machine, a port another server holds or one that needs
    root. uvicorn itself logged these on four INFO / ERROR lines and exited 3."""
    import errno
    import socket

    from kvplan.errors import InputError

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        why = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise InputError(f"--host {host!r}: not an address or a name that resolves ({why}); "
                         "give an address of this machine, e.g. 127.0.0.1 or 0.0.0.0") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's server
        try:
            sock.bind(address)
        except OSError as exc:
            hint = {errno.EADDRINUSE: "another program listens there; choose another --port",
                    errno.EACCES: "ports below 1024 need root; choose a port above 1023",
                    errno.EADDRNOTAVAIL: "not an address of this machine; give one of its "
                    "addresses, e.g. 127.0.0.1 or 0.0.0.0"}.get(exc.errno or 0, "")
            raise InputError(f"--host {host} --port {port}: cannot listen there "
                             f"({(exc.strerror or str(exc)).lower()})"
                             + (f"; {hint}" if hint else "")) from None


def serve(host: str, port: int, settings: WebSettings, *, log: bool = True) -> None:
    """Run the app under uvicorn until interrupted."""
    import sys

    sys.setswitchinterval(SWITCH_INTERVAL_S)
    server(host, port, settings, log=log).run()
