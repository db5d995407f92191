"""The token a server bound beyond loopback asks for, as Jupyter does: printed once at start,
accepted as ``?token=`` (which also sets a cookie, so the page's own calls pass), as
``Authorization: Bearer TOKEN`` (or ``token TOKEN``), or as that cookie. Anything else: 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from typing import Any
from urllib.parse import unquote_plus

from kvplan.web.limits import refuse

MIN_TOKEN_CHARS = 16


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost'; any other name or address is the network."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe)."""
    return secrets.token_urlsafe(32)


def cookie_name(scope: dict[str, Any]) -> str:
    """One cookie per port: two servers on one host do not overwrite each other's token."""
    server = scope.get("server") or ("", 0)
    return f"kvplan_token_{server[1]}"


class TokenAuth:
    """Lets a request through only with ``token``; strips ``token=`` from the query it passes."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        kept, from_query = _split_query(scope.get("query_string", b""))
        scope["query_string"] = kept  # in place: uvicorn's access log reads it, no token there
        if any(self._ok(t) for t in from_query):
            await self.app(scope, receive, _with_cookie(send, cookie_name(scope), self.token))
        elif self._ok(_header_token(scope)) or self._ok(_cookie_token(scope)):
            await self.app(scope, receive, send)
        else:
            await refuse(send, 401, "this kvplan web server asks for its token: open the URL "
                         "it printed at start (.../?token=...), or send 'Authorization: Bearer "
                         "TOKEN'", ((b"www-authenticate", b"Bearer"),))

    def _ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())


def _split_query(raw: bytes) -> tuple[bytes, list[str]]:
    """The query without its ``token=`` items (others kept byte for byte), and their values."""
    kept, tokens = [], []
    for item in raw.split(b"&"):
        key, _, value = item.partition(b"=")
        if unquote_plus(key.decode("latin-1")) == "token":
            tokens.append(unquote_plus(value.decode("latin-1")))
        elif item:
            kept.append(item)
    return b"&".join(kept), tokens


def _header_token(scope: dict[str, Any]) -> str | None:
    value = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
    scheme, _, token = value.strip().partition(" ")
    return token.strip() if scheme.lower() in ("bearer", "token") and token.strip() else None


def _cookie_token(scope: dict[str, Any]) -> str | None:
    from starlette.requests import cookie_parser

    raw = dict(scope.get("headers") or []).get(b"cookie", b"").decode("latin-1")
    return cookie_parser(raw).get(cookie_name(scope)) if raw else None


def _with_cookie(send: Any, name: str, token: str) -> Any:
    """``send`` that adds the token cookie to the response (HttpOnly, same-site only)."""
    cookie = f"{name}={token}; Path=/; HttpOnly; SameSite=Strict".encode()

    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"set-cookie", cookie)]}
        await send(message)

    return sending
