"""The web server as a service, in-process: one gate for every compute endpoint (503/429 with
Retry-After), jobs that queue, 413 for any over-cap body, nested JSON a 4xx, and the token."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.gate import Busy, Gate, Left
from kvplan.web.settings import WebSettings

M = "meta-llama/Llama-3.2-1B"
SIM = {"model": M, "num_prompts": 4, "random_input_len": 64, "random_output_len": 8}
PLAN = {"model": M, "gpu": "H100", "tensor_parallel_size": "1", "num_prompts": 10,
        "request_rate": 5, "slo": "ttft:p99:2000 tpot:p99:100"}
TOKEN = "k" * 40


def test_gate_hands_slots_over_in_arrival_order() -> None:
    gate = Gate(running=1, queued=2)
    first, second, third = gate.admit(), gate.admit(), gate.admit()
    assert first.started.is_set() and not second.started.is_set()
    assert (gate.ahead(first), gate.ahead(second), gate.ahead(third)) == (0, 1, 2)
    with pytest.raises(Busy) as refused:
        gate.admit()
    assert refused.value.status == 503
    assert refused.value.retry_after_s == 15  # 5 s assumed per run x (2 waiting + 1) / 1 slot
    gate.release(first)
    assert second.started.is_set() and not third.started.is_set()
    with pytest.raises(Left):  # a cancelled job leaves the line, and its place is free
        gate.wait(third, stop=lambda: True)
    assert gate.ahead(third) == 0 and gate.admit() is not None


def test_retry_after_follows_the_runs_seen() -> None:
    gate = Gate(running=2, queued=0)
    for _ in range(3):
        ticket = gate.admit()
        ticket.since -= 29.9  # as if it ran 29.9 s
        gate.release(ticket)
    assert gate.retry_after() == 15  # ceil(median 29.9 s x (0 waiting + 1) / 2 slots)


def _fill(client: TestClient) -> list[Any]:
    gate = client.app.state.gate  # type: ignore[attr-defined]
    return [gate.admit() for _ in range(gate.running + gate.queued)]


@pytest.mark.parametrize(("method", "url", "kwargs"), [
    ("GET", "/api/simulate", {"params": SIM}),
    ("GET", "/api/plan", {"params": PLAN}),
    ("POST", "/api/simulate/jobs", {"json": SIM}),
    ("POST", "/api/plan/jobs", {"json": PLAN}),
])
def test_every_compute_endpoint_shares_the_gate(method: str, url: str,
                                                kwargs: dict[str, Any]) -> None:
    """Before: GET /api/simulate and /api/plan ran outside the jobs' cap (40 at once)."""
    client = TestClient(create_app(WebSettings(max_running_sims=1, max_queued_sims=1)))
    held = _fill(client)
    r = client.request(method, url, **kwargs)
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) >= 1
    assert "the server is busy" in r.json()["detail"] and "\n" not in r.json()["detail"]
    for ticket in held:
        client.app.state.gate.release(ticket)  # type: ignore[attr-defined]
    assert client.request(method, url, **kwargs).status_code == 200


def _poll(client: TestClient, job: str, *states: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/api/simulate/jobs/{job}").json()
        if view["state"] in states:
            return view
        time.sleep(0.05)
    raise AssertionError(f"job {job} never reached {states}: {view}")


def test_a_job_queues_then_runs_and_one_client_waits_its_turn() -> None:
    client = TestClient(create_app(WebSettings(max_running_sims=1, max_queued_sims=2)))
    gate = client.app.state.gate  # type: ignore[attr-defined]
    held = gate.admit()
    mine = {"x-kvplan-client": "tab-1"}
    r = client.post("/api/simulate/jobs", json=SIM, headers=mine)
    assert r.status_code == 200 and (r.json()["state"], r.json()["ahead"]) == ("queued", 1)
    again = client.post("/api/simulate/jobs", json=SIM, headers=mine)
    assert again.status_code == 429 and int(again.headers["retry-after"]) >= 1
    gate.release(held)
    done = _poll(client, r.json()["job"], "done", "error")
    assert done["state"] == "done" and done["result"]["completed"] == 4


def test_a_queued_job_can_be_cancelled() -> None:
    client = TestClient(create_app(WebSettings(max_running_sims=1, max_queued_sims=1)))
    gate = client.app.state.gate  # type: ignore[attr-defined]
    held = gate.admit()
    job = client.post("/api/simulate/jobs", json=SIM).json()["job"]
    client.delete(f"/api/simulate/jobs/{job}")
    view = _poll(client, job, "cancelled")
    assert view["error"] == "cancelled from the page while queued"
    after = gate.admit()  # Busy if the cancelled job still held its place in line
    assert gate.ahead(after) == 1
    for ticket in (held, after):
        gate.release(ticket)
    assert client.get("/api/simulate", params=SIM).status_code == 200


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app())


def test_deeply_nested_upload_is_422(client: TestClient) -> None:
    """W1: json.loads raised RecursionError in resolve._json_object, and the answer was 500."""
    deep = b"[" * 200_000 + b"]" * 200_000
    r = client.post("/api/upload", files={"file": ("deep.json", deep)})
    assert r.status_code == 422, r.text
    assert "nested too deeply" in r.json()["detail"]


def _chunks(n: int, size: int = 64 * 1024) -> Iterator[bytes]:
    for _ in range(n):
        yield b" " * size


@pytest.mark.parametrize("url", ["/api/upload", "/api/simulate/jobs", "/api/plan/jobs"])
def test_a_chunked_body_over_the_cap_is_413(client: TestClient, url: str) -> None:
    """W5: sent without Content-Length, the same body got 400 (jobs) or 422 (upload)."""
    r = client.post(url, content=_chunks(48), headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["detail"] == "request body over 2097152 bytes"
    assert r.headers["connection"] == "close"


def test_a_body_at_the_cap_is_read(client: TestClient) -> None:
    body = b'{"model": "' + M.encode() + b'"' + b" " * (2 * 2**20 - 40) + b"}"
    assert len(body) <= 2 * 2**20
    r = client.post("/api/simulate/jobs", content=body,
                    headers={"content-type": "application/json", "x-kvplan-client": "cap"})
    assert r.status_code in (200, 503), r.text  # read and parsed; a job or a full queue


def _authed() -> TestClient:
    return TestClient(create_app(WebSettings(token=TOKEN)))


@pytest.mark.parametrize(("method", "url"), [
    ("GET", "/api/models"), ("GET", "/"), ("GET", "/model"), ("GET", "/docs"),
    ("GET", "/openapi.json"), ("GET", "/static/app.js"), ("GET", f"/api/kv?model={M}"),
    ("GET", f"/api/simulate?model={M}&num_prompts=2"), ("POST", "/api/upload"),
    ("POST", "/api/simulate/jobs"), ("DELETE", "/api/simulate/jobs/abc"),
])
def test_with_a_token_set_nothing_is_served_without_it(method: str, url: str) -> None:
    """W4: bound off loopback the API ran simulations for anyone; now 401 without the token."""
    client = _authed()
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN},
                    {"cookie": "kvplan_token_80=wrong"}):
        r = client.request(method, url, headers=headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
    r = client.request(method, f"{url}{'&' if '?' in url else '?'}token=nope")
    assert r.status_code == 401


def test_the_token_as_header_query_or_cookie() -> None:
    client = _authed()
    for scheme in ("Bearer", "token"):
        r = client.get("/api/kv", params={"model": M},
                       headers={"authorization": f"{scheme} {TOKEN}"})
        assert r.status_code == 200 and r.json()["bytes_per_token"] == 32768
    r = client.get("/api/kv", params={"model": M, "token": TOKEN})  # stripped: no 422
    assert r.status_code == 200, r.text
    assert r.headers["set-cookie"] == (f"kvplan_token_80={TOKEN}; Path=/; HttpOnly; "
                                       "SameSite=Strict")
    assert client.get("/api/models").status_code == 200  # the page's calls: the cookie
    client.cookies.clear()
    assert client.get("/api/models").status_code == 401


def test_without_a_token_set_no_token_is_asked(client: TestClient) -> None:
    assert client.get("/api/models").status_code == 200
    assert "set-cookie" not in client.get("/api/models", params={"token": "x"}).headers
