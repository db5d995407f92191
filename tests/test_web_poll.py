"""The page polls a job soon after it starts (within 100 ms), then less and less often
(static/app.js pollDelay: 50, 100, 200, 400, 800 ms), read off the browser's own timings."""

from __future__ import annotations

import itertools
from typing import Any

from tests.webtools import chromium, web_server

TIMINGS = """() => performance.getEntriesByType("resource")
  .filter(e => e.name.includes("/api/simulate/jobs"))
  .map(e => ({name: new URL(e.name).pathname, start: e.startTime, end: e.responseEnd}))"""


def _polls(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    post = entries[0]
    assert post["name"] == "/api/simulate/jobs", entries
    polls = [e for e in entries[1:] if not e["name"].endswith("/charts")]
    return post, polls


def test_first_poll_within_100_ms_then_backing_off() -> None:
    with web_server("--max-sim-requests", "40000") as base, chromium() as ctx:
        page = ctx.new_page()
        page.goto(f"{base}/simulate")
        page.fill("input[name=num_prompts]", "20000")  # runs a few seconds: several polls
        page.fill("input[name=max_concurrency]", "8")
        page.click("#run")
        page.wait_for_selector("body[data-state=done]", state="attached", timeout=120_000)
        post, polls = _polls(page.evaluate(TIMINGS))
    assert len(polls) >= 4, polls
    assert polls[0]["start"] - post["end"] <= 100
    waits = [b["start"] - a["end"] for a, b in itertools.pairwise(polls)]
    assert all(w >= 0 for w in waits)
    assert waits[2] > waits[0] * 2  # 400 ms against 100 ms: backing off, not a fixed tick
    assert max(waits) < 1500  # capped near 800 ms
