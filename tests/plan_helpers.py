"""Small, fast planning inputs shared by the plan tests (seeded, no files)."""

from __future__ import annotations

import numpy as np

from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo, parse_slo


def poisson_workload(n: int, rate: float, prompt: int, output: int, seed: int = 0,
                     spread: float = 0.5) -> Workload:
    """N requests at ``rate`` req/s, lengths uniform in [(1 - spread) x, x]."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate, n)
    gaps[0] = 0.0
    p = rng.integers(int(prompt * (1 - spread)), prompt + 1, n)
    o = rng.integers(max(1, int(output * (1 - spread))), output + 1, n)
    return Workload(name="poisson", arrival_s=np.cumsum(gaps), prompt_tokens=p,
                    output_tokens=o)


def slo(*terms: str) -> Slo:
    return Slo(bounds=parse_slo(list(terms)))


FAST = {"sample_requests": 120, "workers": 1}
