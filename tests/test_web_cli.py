"""`kvplan web`'s start: loopback serves as before; any other address gets a fresh token, printed
once (as Jupyter does), or an explicit --no-auth with a warning. The server is not started:
``serve`` is replaced by a recorder."""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.web.auth import is_loopback
from tests.fuzz.harness import Run, run_cli, verdict


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, Any]]:
    calls: list[tuple[str, int, Any]] = []
    monkeypatch.setattr("kvplan.web.transport.serve",
                        lambda host, port, settings: calls.append((host, port, settings)))
    monkeypatch.delenv("KVPLAN_WEB_TOKEN", raising=False)
    return calls


def web(*args: str) -> Run:
    """`kvplan web ARGS` in-process, through the console-script entry (errors: exit 2)."""
    return run_cli(["web", *args])


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("192.168.1.5", False),
    ("myhost", False), ("", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_loopback_needs_no_token(started: list[Any]) -> None:
    r = web("--port", "8123")
    assert r.code == 0, (r.err, r.crash)
    assert r.out == "kvplan web: open http://127.0.0.1:8123/ (API docs at /docs); Ctrl-C stops\n"
    host, port, settings = started[0]
    assert (host, port, settings.token) == ("127.0.0.1", 8123, None)
    assert (settings.max_running_sims, settings.max_queued_sims) == (2, 8)


def test_all_interfaces_get_a_token_printed_once(started: list[Any]) -> None:
    r = web("--host", "0.0.0.0", "--port", "8123")
    assert r.code == 0, (r.err, r.crash)
    token = started[0][2].token
    assert token is not None and len(token) >= 40  # 32 random bytes, URL-safe base64
    assert r.out.count(token) == 2  # the URL to open, and the header for API clients
    assert f":8123/?token={token}\n" in r.out and f"Bearer {token}'" in r.out
    web("--host", "0.0.0.0", "--port", "8123")
    assert started[1][2].token != token  # a fresh one each start


def test_no_auth_off_loopback_warns(started: list[Any]) -> None:
    r = web("--host", "0.0.0.0", "--no-auth", "--max-running-sims", "3",
            "--max-queued-sims", "0")
    assert r.code == 0, (r.err, r.crash)
    assert started[0][2].token is None
    assert (started[0][2].max_running_sims, started[0][2].max_queued_sims) == (3, 0)
    assert r.err.startswith("warning: --no-auth on 0.0.0.0: anyone who can reach port 8000 "
                               "can run simulations on this machine")
    assert "token" not in r.out


def test_a_token_from_the_environment(started: list[Any],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVPLAN_WEB_TOKEN", "s3cret-s3cret-s3cret")
    r = web("--host", "0.0.0.0")
    assert r.code == 0, (r.err, r.crash)
    assert started[0][2].token == "s3cret-s3cret-s3cret"
    assert "s3cret" not in r.out + r.err and "?token=<$KVPLAN_WEB_TOKEN>" in r.out
    monkeypatch.setenv("KVPLAN_WEB_TOKEN", "short")
    r = web()
    assert verdict(r) == "error" and "$KVPLAN_WEB_TOKEN must hold at least 16" in r.err


@pytest.mark.parametrize("args", [["--max-running-sims", "0"], ["--max-queued-sims", "-1"],
                                  ["--port", "0"]])
def test_bad_limits_are_refused(started: list[Any], args: list[str]) -> None:
    r = web(*args)
    assert verdict(r) == "error" and started == []
