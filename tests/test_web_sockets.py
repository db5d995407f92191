"""Slow and oversized clients on raw loopback sockets against the real uvicorn server (its
kvplan protocol and limits, short timeouts): late headers are cut off, a slow body gets 408, a
chunked body over the cap gets 413. Each test stops by itself within a few seconds."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import httpx

from kvplan.web.settings import WebSettings
from kvplan.web.transport import server
from tests.webtools import free_port

LIMITS = WebSettings(header_timeout_s=1.0, body_timeout_s=1.0)


@contextmanager
def live(settings: WebSettings = LIMITS) -> Iterator[int]:
    """The app under uvicorn on a free loopback port, on a thread; stopped on exit."""
    port = free_port()
    srv = server("127.0.0.1", port, settings, log=False)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(10)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _closed(sock: socket.socket) -> bool:
    """True once the server has closed its side (EOF or reset); reads any answer away."""
    if not select.select([sock], [], [], 0)[0]:
        return False
    try:
        return sock.recv(65536) == b""
    except OSError:
        return True


def test_late_headers_are_cut_off() -> None:
    """W3: 300 sockets trickling header lines were all held; now each closes after 1 s."""
    with live() as port:
        idle = [_connect(port) for _ in range(5)]  # send nothing at all
        slow = [_connect(port) for _ in range(15)]
        for s in slow:
            s.sendall(b"GET /api/models HTTP/1.1\r\nHost: x\r\n")
        t0, shut = time.monotonic(), {}
        while len(shut) < 20 and time.monotonic() - t0 < 6:
            for i, s in enumerate(idle + slow):
                if i in shut:
                    continue
                if _closed(s) or (s in slow and not _trickle(s)):
                    shut[i] = time.monotonic() - t0
            time.sleep(0.1)
        fresh = httpx.get(f"http://127.0.0.1:{port}/api/gpus", timeout=5)
    for s in idle + slow:
        s.close()
    assert len(shut) == 20, f"still open after 6 s: {20 - len(shut)}"
    assert max(shut.values()) < 3.0, shut
    assert fresh.status_code == 200


def _trickle(sock: socket.socket) -> bool:
    try:
        sock.sendall(b"X-Slow: 1\r\n")
        return True
    except OSError:
        return False


def test_a_slow_body_gets_408() -> None:
    """W3: a body sent at 1 byte/s was held for as long as it took; now 408 after 1 s."""
    with live() as port, _connect(port) as s:
        s.sendall(b"POST /api/simulate/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: 100\r\n\r\n{")
        t0, got = time.monotonic(), b""
        while time.monotonic() - t0 < 5 and not got:
            got = s.recv(65536) if select.select([s], [], [], 0.2)[0] else b""
            if not got:
                _send_quietly(s, b" ")
        waited = time.monotonic() - t0
        got += _rest(s)  # headers and body may arrive in separate segments
        answer = got.decode()
    assert answer.startswith("HTTP/1.1 408"), answer
    assert "request body not received within 1 s" in answer and "connection: close" in answer
    assert 0.9 < waited < 3.0


def _rest(sock: socket.socket) -> bytes:
    """Whatever else the server sends before it closes (at most 2 s)."""
    out, t0 = b"", time.monotonic()
    while time.monotonic() - t0 < 2 and select.select([sock], [], [], 0.2)[0]:
        with suppress(OSError):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
            continue
        break
    return out


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    with suppress(OSError):
        sock.sendall(data)


def test_a_chunked_body_over_the_cap_gets_413() -> None:
    """W5: without Content-Length, 3 MB got 400/422 from the body parsers; now 413."""
    for path in ("/api/upload", "/api/simulate/jobs"):
        with live() as port, _connect(port) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n".encode())
            chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"  # 64 KiB per chunk
            sent, answer = 0, b""
            while sent < 64 and not answer:
                _send_quietly(s, chunk)
                sent += 1
                if select.select([s], [], [], 0.01)[0]:
                    answer = s.recv(65536)
            while not answer and select.select([s], [], [], 2)[0]:
                answer = s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 413"), (path, answer[:200])
        assert sent >= 32, sent  # the answer came once the body passed 2 MiB


def test_a_declared_body_over_the_cap_gets_413_unread() -> None:
    with live() as port, _connect(port) as s:
        s.sendall(b"POST /api/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n")
        answer = s.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer


def test_kvplan_web_with_a_token_refuses_requests_without_it() -> None:
    """W4 end to end: `kvplan web` given a token (here $KVPLAN_WEB_TOKEN, which also applies on
    loopback) answers 401 without it, through uvicorn and the whole middleware stack; the
    token never reaches its output (uvicorn's access log shows the query without it)."""
    token = "t0ken-" * 4
    port = free_port()
    env = {**os.environ, "KVPLAN_WEB_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "web", "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                first = httpx.get(f"{base}/api/gpus", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            raise AssertionError("kvplan web did not answer within 30 s")
        bearer = httpx.get(f"{base}/api/gpus", headers={"authorization": f"Bearer {token}"})
        page = httpx.get(f"{base}/model", params={"token": token})
        upload = httpx.post(f"{base}/api/upload", files={"file": ("c.json", b"{}")})
    finally:
        proc.terminate()
        out = proc.communicate(timeout=10)[0].decode()
    assert first.status_code == 401 and upload.status_code == 401
    assert bearer.status_code == 200 and page.status_code == 200
    assert page.headers["set-cookie"].startswith(f"kvplan_token_{port}={token};")
    assert token not in out and "?token=<$KVPLAN_WEB_TOKEN>" in out
