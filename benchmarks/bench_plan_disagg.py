"""Time kvplan plan with disaggregation in the space: Llama-3.1-70B on azure-conv at its rate.

Run: .venv/bin/python benchmarks/bench_plan_disagg.py [--workers 2] [--rounds 3]
     [--cases agg,joint,joint-exhaustive]

The aggregated space: 5 GPU types x TP 2,4,8 x KV auto,fp8 x max-num-seqs
64,128,256,512,default = 150 configurations (vLLM's default chunk). ``joint`` adds every
xPyD fleet of those GPUs (prefill GPU x decode GPU, TP pairs with decode TP a multiple of
prefill TP, 1..4 instances each, ib-ndr): 25 x 6 x 16 = 2,400 fleets, ranked with the
aggregated candidates (kvplan.analysis.disagg.joint). ``joint-exhaustive`` simulates every
memory-feasible fleet of a smaller grid (1..2 instances) to show what the funnel saves.
Each case runs in a fresh process per round; prints the stages, simulations, winner, and
the median wall and CPU (the process and its workers).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

MODEL = "meta-llama/Llama-3.1-70B"
GPUS = ["H100", "H200", "B200", "A100-80GB", "L40S"]
SPACE: dict[str, Any] = {"gpus": GPUS, "tensor_parallel_sizes": [2, 4, 8],
                         "kv_cache_dtypes": ["auto", "fp8"],
                         "max_num_seqs": [64, 128, 256, 512, None],
                         "max_num_batched_tokens": [None]}
SLO = ["ttft:p99:2000", "tpot:p99:100"]
CASES = {"agg": (False, "funnel", 4), "joint": (True, "funnel", 4),
         "joint-exhaustive": (True, "exhaustive", 2)}


def _one(case: str, workers: int) -> None:
    import kvplan
    from kvplan.analysis.disagg.joint import plan_joint
    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link

    joint, search, instances = CASES[case]
    slo = kvplan.Slo(bounds=kvplan.parse_slo(SLO))
    args = kvplan.WorkloadArgs(dataset="azure-conv")
    t0 = time.perf_counter()
    p = kvplan.plan(MODEL, args, slo, search=search, workers=workers, **SPACE)
    line: dict[str, Any] = {"case": case, "enumerated": p.report.enumerated,
                            "aggregated_winner": p.winner and p.winner.id,
                            "aggregated_usd_per_hour": p.winner and p.winner.usd_per_hour}
    if joint:
        work = plan_traffic(args).target
        j = plan_joint(p, load_model(MODEL), work, slo, gpus=[load_gpu(g) for g in GPUS],
                       tps=[2, 4, 8], links=[load_link("ib-ndr")], max_instances=instances,
                       search=search, workers=workers)
        w = j.winner
        line.update({"fleets": sum(c.kind == "disaggregated" for c in j.candidates),
                     "disagg_simulations": j.simulations,
                     "stages": dict(Counter(f"{c.kind}:{c.stage}" for c in j.candidates)),
                     "winner": w and f"{w.id} {w.kind} ${w.usd_per_hour:,.2f}/h"})
    line["wall_s"] = time.perf_counter() - t0
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    line["cpu_s"] = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    print(json.dumps(line))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", default="agg,joint")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(a.one, a.workers)
        return
    cases = a.cases.split(",")
    got: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
    for r in range(a.rounds):
        for c in cases[r % len(cases):] + cases[:r % len(cases)]:
            out = subprocess.run([sys.executable, __file__, "--one", c, "--workers",
                                  str(a.workers)], capture_output=True, text=True, check=True)
            got[c].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for c, runs in got.items():
        last = {k: v for k, v in runs[-1].items() if k not in ("wall_s", "cpu_s")}
        walls, cpus = [x["wall_s"] for x in runs], [x["cpu_s"] for x in runs]
        print(f"{c:17s} wall {statistics.median(walls):7.2f} s ({min(walls):.2f}-"
              f"{max(walls):.2f})  cpu {statistics.median(cpus):7.2f} s  {json.dumps(last)}")


if __name__ == "__main__":
    main()
