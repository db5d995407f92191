"""Test helpers for the web page: a loopback server in a subprocess, Debian's chromium."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("KVPLAN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent.parent / ".artifacts" / "web"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def web_server(*flags: str, token: str | None = None) -> Iterator[str]:
    """`kvplan web` on a free loopback port; yields its base URL; stopped on exit. With
    ``token``, the server asks for it ($KVPLAN_WEB_TOKEN)."""
    port = free_port()
    env = {**os.environ, **({"KVPLAN_WEB_TOKEN": token} if token else {})}
    proc = subprocess.Popen([sys.executable, "-m", "kvplan", "web", "--port", str(port), *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base + (f"/api/gpus?token={token}" if token else "/api/gpus"), proc)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_until_up(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"kvplan web exited: {err}")
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("kvplan web did not answer within 30 s")


@contextmanager
def chromium(**context: Any) -> Iterator[Any]:
    """A persistent Chromium context (fresh profile) from Debian's package, headless."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1280, "height": 900}, **context)
        try:
            yield ctx
        finally:
            ctx.close()


def screenshot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under .artifacts/web/ (git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@contextmanager
def watched_page() -> Iterator[Any]:
    """A chromium page for a test module; the module fails if any page script raised."""
    with chromium() as ctx:
        pg = ctx.new_page()
        errors: list[str] = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        yield pg
        assert errors == []


def settle(page: Any, *states: str, timeout_ms: int = 60_000) -> None:
    """Wait until the page's body reaches one of ``states`` (its ``data-state``)."""
    wanted = ", ".join(f"body[data-state={s}]" for s in states)
    page.wait_for_selector(wanted, state="attached", timeout=timeout_ms)
