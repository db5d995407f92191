"""The harness bench_disagg.py and bench_dp.py share: each case in a fresh process, the
order rotated every round, medians of wall and CPU seconds, the ratios of one run."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any


def spawn(script: str, name: str, extra: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``script --case name *extra`` in a fresh interpreter; its last stdout line is the
    case's JSON. A case named ``*-py`` (``agg-py``, ``disagg-py``) runs with the compiled
    core switched off (KVPLAN_SIM_CORE=python)."""
    env = dict(os.environ)
    if name.endswith("-py"):
        env["KVPLAN_SIM_CORE"] = "python"
    out = subprocess.run([sys.executable, script, "--case", name, *extra], env=env,
                         check=True, capture_output=True, text=True)
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def rounds(script: str, names: Sequence[str], repeat: int, extra: Sequence[str] = ()
           ) -> tuple[dict[str, dict[str, float]], dict[str, list[dict[str, Any]]]]:
    """Every case once per round, the order rotated; (medians of s and cpu_s, every run)."""
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    k = len(names)
    for i in range(repeat):
        for n in [*names[i % k:], *names[:i % k]]:
            runs[n].append(spawn(script, n, extra))
    med = {n: {key: statistics.median(r[key] for r in runs[n]) for key in ("s", "cpu_s")}
           for n in names}
    return med, runs


def report(label: str, case: str, names: Sequence[str], repeat: int,
           script: str, extra: Sequence[str] = (), also: Sequence[str] = ()) -> None:
    """Print each case's medians and ``case`` (then each of ``also``) against the two
    aggregated baselines."""
    med, runs = rounds(script, names, repeat, extra)
    for n in names:
        print(f"{n:9s} wall {med[n]['s']:7.3f} s  cpu {med[n]['cpu_s']:7.3f} s  "
              f"steps {runs[n][0]['steps']}")
    for c, name in ((case, label), *((a, a) for a in also)):
        for base in ("agg-py", "agg-core"):
            print(f"{name} / {base}: wall {med[c]['s'] / med[base]['s']:.2f}x, "
                  f"cpu {med[c]['cpu_s'] / med[base]['cpu_s']:.2f}x")
