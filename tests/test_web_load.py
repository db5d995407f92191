"""200 concurrent API requests to `kvplan web` on 127.0.0.1: all answered, no errors; the p99
latency is printed and written to .artifacts/web/load.json. Bounded: stops by itself."""

from __future__ import annotations

import asyncio
import json
import time

import httpx

from tests.webtools import ARTIFACTS, web_server

M = "meta-llama/Llama-3.1-8B"
URLS = [
    ("/api/kv", {"model": M}),
    ("/api/capacity", {"model": M, "gpu": "H100"}),
    ("/api/latency", {"model": M, "gpu": "H100", "prompt": 1024, "output": 128, "batch": 8}),
    ("/api/request", {"model": M, "prompt": 2048, "output": 128, "chunk": 512}),
]
N = 200


async def _fire(base: str) -> tuple[list[int], list[float], float]:
    limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:

        async def one(i: int) -> tuple[int, float]:
            path, params = URLS[i % len(URLS)]
            t0 = time.perf_counter()
            r = await client.get(path, params=params)
            return r.status_code, time.perf_counter() - t0

        t0 = time.perf_counter()
        got = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(N))), timeout=90)
        wall = time.perf_counter() - t0
    return [c for c, _ in got], sorted(s for _, s in got), wall


def test_200_concurrent_requests_all_answered() -> None:
    with web_server() as base:
        httpx.get(f"{base}/api/kv", params={"model": M}, timeout=30)  # warm the catalog
        codes, seconds, wall = asyncio.run(_fire(base))
    assert codes == [200] * N
    p50, p99 = seconds[N // 2], seconds[int(0.99 * N) - 1]
    figures = {"requests": N, "errors": N - codes.count(200), "wall_s": round(wall, 3),
               "p50_s": round(p50, 3), "p99_s": round(p99, 3), "max_s": round(seconds[-1], 3)}
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(figures, indent=2))
    print(f"load test: {figures}")
    assert p99 < 60
