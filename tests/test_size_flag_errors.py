"""A size that cannot be read names its flag, on the CLI and the web API (whose page then
shows the message beside that field, not under MODEL)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from tests.conftest import assert_one_line_error, run_cli

L8B = "meta-llama/Llama-3.1-8B"


def test_cli_names_the_flag() -> None:
    r = run_cli("capacity", L8B, "--gpu", "H100", "--kv-cache-memory", "abc")
    assert_one_line_error(r)
    assert r.err.startswith("error: --kv-cache-memory: cannot read size 'abc'")


def test_api_names_the_field() -> None:
    body = TestClient(create_app()).get(
        "/api/capacity", params={"model": L8B, "kv_cache_memory": "abc"}).json()
    assert body["field"] == "kv_cache_memory"  # was None: the page put it under MODEL
    assert body["detail"].startswith("--kv-cache-memory: cannot read size 'abc'")
