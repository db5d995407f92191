"""Time a lockstep DP fleet simulation next to the aggregated one on the same workload.

Run: .venv/bin/python benchmarks/bench_dp.py [--repeat 3] [--dp 4]

Cases (Qwen3-30B-A3B, H200, --max-model-len 8192, 4,000 random 1024/128 prompts at 40
req/s, simulation only through simulate_serving, each in a fresh process):
  agg-core  one engine (dp 1) on the whole workload (the compiled core where it was built)
  agg-py    the same with KVPLAN_SIM_CORE=python (the pure-Python loop)
  dp        --data-parallel-size N --enable-expert-parallel: N ranks stepped in lockstep
            (pure Python, every step a general step on every rank)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

MODEL = "Qwen/Qwen3-30B-A3B"


def _case(name: str, dp: int) -> dict[str, Any]:
    from kvplan.analysis.serving import simulate_serving
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.serving import EngineConfig

    work = build_workload(WorkloadArgs(num_prompts=4000, request_rate=40.0))
    engine = (EngineConfig(max_model_len=8192, data_parallel_size=dp,
                           enable_expert_parallel=True) if name == "dp"
              else EngineConfig(max_model_len=8192))
    t0, c0 = time.perf_counter(), time.process_time()
    run = simulate_serving(MODEL, "H200", engine, work)
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": run.result.num_steps}


def _spawn(name: str, dp: int) -> dict[str, Any]:
    env = dict(os.environ)
    if name == "agg-py":
        env["KVPLAN_SIM_CORE"] = "python"
    out = subprocess.run([sys.executable, __file__, "--case", name, "--dp", str(dp)], env=env,
                         check=True, capture_output=True, text=True)
    got: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--case")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(_case(args.case, args.dp)))
        return
    names = ["agg-core", "agg-py", "dp"]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i in range(args.repeat):
        for n in names[i % 3:] + names[:i % 3]:  # rotate the order each round
            runs[n].append(_spawn(n, args.dp))
    med = {n: {k: statistics.median(r[k] for r in runs[n]) for k in ("s", "cpu_s")}
           for n in names}
    for n in names:
        print(f"{n:9s} wall {med[n]['s']:7.3f} s  cpu {med[n]['cpu_s']:7.3f} s  "
              f"steps {runs[n][0]['steps']}")
    for base in ("agg-py", "agg-core"):
        print(f"dp{args.dp} / {base}: wall {med['dp']['s'] / med[base]['s']:.2f}x, "
              f"cpu {med['dp']['cpu_s'] / med[base]['cpu_s']:.2f}x")


if __name__ == "__main__":
    main()
