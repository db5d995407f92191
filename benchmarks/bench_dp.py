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
import time
from typing import Any

from case_rounds import report

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dp", type=int, default=4)
    ap.add_argument("--case")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(_case(args.case, args.dp)))
        return
    report(f"dp{args.dp}", "dp", ["agg-core", "agg-py", "dp"], args.repeat, __file__,
           ("--dp", str(args.dp)))

if __name__ == "__main__":
    main()
