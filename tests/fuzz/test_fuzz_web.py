"""The web API's fuzz families: generated bodies and uploads through the app in-process
(FastAPI's TestClient, the middleware included), counted with the CLI families.

The property, for every request: an answer below 500, within the time limit, in JSON; an error
answer's ``detail`` is one line; a body over the cap is 413, however it was sent; an accepted
upload's token answers every endpoint below 500 as well. Jobs that start are cancelled at once.
"""

from __future__ import annotations

import signal
import traceback
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings

from tests.fuzz.harness import COUNTS, TIME_LIMIT_S
from tests.fuzz.test_fuzz_cli import EXAMPLES, FUZZ_SETTINGS, SCALE
from tests.fuzz.web_strategies import CAP, WEB_FAMILIES, WebCase


class Hang(BaseException):
    """One request passed TIME_LIMIT_S."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang()


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    from kvplan.web.app import create_app

    with TestClient(create_app()) as c:  # an exception in the app reaches run_case
        yield c


def _stream(body: bytes) -> Iterator[bytes]:
    for i in range(0, len(body), 64 * 1024):
        yield body[i:i + 64 * 1024]


def send(client: TestClient, case: WebCase) -> tuple[int, list[str]]:
    """Make the case's requests: the first answer's status, and the breaches of the property
    (none: it held)."""
    headers = {"x-kvplan-client": uuid.uuid4().hex[:16]}
    if case.content_type is not None:
        headers["content-type"] = case.content_type
    content: Any = _stream(case.body) if case.chunked else case.body
    r = client.request(case.method, case.path, content=content, headers=headers)
    bad = breaches(r, f"{case.method} {case.path} ({len(case.body)} bytes)")
    if len(case.body) > CAP and r.status_code != 413:
        bad.append(f"{len(case.body)}-byte body answered {r.status_code}, not 413")
    if r.status_code == 200 and "job" in r.json():
        job = f"{case.path}/{r.json()['job']}"
        bad += breaches(client.delete(job), f"DELETE {job}")
        bad += breaches(client.get(job), f"GET {job}")
    if r.status_code == 200 and case.path == "/api/upload":
        for path, params in case.then:
            query = {**dict(params), "model": r.json()["model"]}
            bad += breaches(client.get(path, params=query), f"GET {path} {query}")
    return r.status_code, bad


def breaches(r: Any, what: str) -> list[str]:
    if r.status_code >= 500:
        return [f"{what}: HTTP {r.status_code}: {r.text[:500]}"]
    try:
        body = r.json()
    except ValueError:
        return [f"{what}: HTTP {r.status_code}, not JSON: {r.text[:200]!r}"]
    if r.status_code >= 400:
        detail = body.get("detail") if isinstance(body, dict) else None
        if not isinstance(detail, str) or "\n" in detail or not detail:
            return [f"{what}: HTTP {r.status_code}, detail not one line: {r.text[:300]}"]
    return []


def run_case(family: str, client: TestClient, case: WebCase) -> None:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    status = 0
    try:
        status, bad = send(client, case)
    except Hang:
        bad = [f"hang: over {TIME_LIMIT_S:.0f} s"]
    except Exception:
        bad = [f"crash: {traceback.format_exc()}"]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    counts = COUNTS.setdefault(family, Counter())
    counts["FAIL" if bad else "ok" if status < 400 else "error"] += 1
    assert not bad, f"{case.method} {case.path} {case.body[:300]!r}\n" + "\n".join(bad)


@pytest.mark.parametrize("family", sorted(WEB_FAMILIES))
def test_fuzz_web_family(family: str, client: TestClient) -> None:
    examples_n = max(1, int(EXAMPLES * SCALE))

    @settings(max_examples=examples_n, **FUZZ_SETTINGS)
    @given(WEB_FAMILIES[family])
    def examples(case: WebCase) -> None:
        run_case(family, client, case)

    examples()
