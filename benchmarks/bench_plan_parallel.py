"""Time `kvplan plan` on MoE models with and without the DP / EP pools in the space.

Run: .venv/bin/python benchmarks/bench_plan_parallel.py [--workers 2] [--rounds 1]
     [--cases v3-tp,v3-dp,qwen-tp,qwen-dp]

Each case is one whole `kvplan plan ... --json` command in a fresh process (as a user runs
it); ``-tp`` cases pass ``--data-parallel-size 1`` (the TP-only space the planner searched
before the DP / EP levers), ``-dp`` cases the default space (DP 1, 2, 4, 8 within a node,
each dp > 1 with EP and without). Prints, per case, the candidates, stages, simulations,
winner and its cost, and the median wall and CPU (the command and its workers) over the
rounds; cases of one round run one after the other, rotated between rounds.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

V3 = ["deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--max-num-batched-tokens", "default",
      "--dataset", "random", "--num-prompts", "400", "--random-input-len", "256",
      "--random-output-len", "1024", "--request-rate", "30", "--sample-requests", "200",
      "--slo", "ttft:p99:5000", "--slo", "tpot:p99:150"]
QWEN = ["Qwen/Qwen3-30B-A3B", "--gpu", "H100,H200,A100-80GB", "--dataset", "random",
        "--num-prompts", "1000", "--random-input-len", "1024", "--random-output-len", "256",
        "--request-rate", "20", "--slo", "ttft:p99:2000", "--slo", "tpot:p99:50"]
CASES = {"v3-tp": [*V3, "-dp", "1"], "v3-dp": V3, "qwen-tp": [*QWEN, "-dp", "1"],
         "qwen-dp": QWEN}


def _run(case: str, workers: int) -> dict[str, Any]:
    argv = [sys.executable, "-m", "kvplan", "plan", *CASES[case], "--workers", str(workers),
            "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{case}: exit {out.returncode}: {out.stderr.strip()}")
    d = json.loads(out.stdout)
    s, r = d["summary"], d["search_report"]
    w = next((c for c in d["candidates"] if c["id"] == s.get("best")), None)
    layout = None if w is None else (
        f"{w['gpu']} TP{w['tensor_parallel_size']} DP{w['data_parallel_size']}"
        f"{' EP' if w['enable_expert_parallel'] else ''} x {s['replicas']}")
    return {"case": case, "enumerated": r["enumerated"],
            "stages": {k: v for k, v in r["stages"].items() if v},
            "capacity_searches": r["capacity_searches"],
            "fleet_simulations": r["fleet_simulations"], "sim_requests": r["sim_requests"],
            "winner": layout, "usd_per_hour": s.get("usd_per_hour"), "wall_s": wall,
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--cases", default="v3-tp,v3-dp,qwen-tp,qwen-dp")
    a = ap.parse_args()
    cases = a.cases.split(",")
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    for k in range(a.rounds):
        for case in cases[k % len(cases):] + cases[:k % len(cases)]:
            line = _run(case, a.workers)
            runs[case].append(line)
            print(json.dumps(line), flush=True)
    for case, lines in runs.items():
        print(f"{case}: wall {statistics.median(x['wall_s'] for x in lines):.1f} s, CPU "
              f"{statistics.median(x['cpu_s'] for x in lines):.1f} s, {lines[0]['winner']} "
              f"${lines[0]['usd_per_hour']}/h")


if __name__ == "__main__":
    main()
