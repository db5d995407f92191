"""Time kvplan plan: Llama-3.1-70B on the azure-conv trace at its own rate.

Run: .venv/bin/python benchmarks/bench_plan.py [--workers 2] [--no-exhaustive] [--no-ray]
[--no-margin]
The space: 5 GPU types x TP 1,2,4,8 x KV auto,fp8 x weights bf16,fp8 x max-num-seqs
128,256,default x the default chunk sizes 512,2048,default = 720 configurations.
Prints the counts per funnel stage, the simulated
requests and wall time of the funnel, of --search exhaustive on the same space (the ratio is
the funnel's gain), of the Ray executor against local (its overhead), and of
--slo-margin band (the SLO at the error band's edge, plus the comparison search without it),
all in one run.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

MODEL = "meta-llama/Llama-3.1-70B"
SPACE: dict[str, Any] = {
    "gpus": ["H100", "H200", "B200", "A100-80GB", "L40S"],
    "tensor_parallel_sizes": [1, 2, 4, 8],
    "kv_cache_dtypes": ["auto", "fp8"],
    "quantizations": [None, "fp8"],
    "max_num_seqs": [128, 256, None],
}
SLO = ["ttft:p99:2000", "tpot:p99:100"]


def run(search: str, executor: str, workers: int, margin: str = "none") -> tuple[Any, float]:
    import kvplan

    slo = kvplan.Slo(bounds=kvplan.parse_slo(SLO))
    t0 = time.perf_counter()
    p = kvplan.plan(MODEL, kvplan.WorkloadArgs(dataset="azure-conv"), slo, search=search,
                    executor=executor, workers=workers, slo_margin=margin, **SPACE)
    return p, time.perf_counter() - t0


def describe(label: str, p: Any, wall: float) -> None:
    r = p.report
    stages = ", ".join(f"{k} {v}" for k, v in r.stage_counts if v)
    w = p.winner
    best = (f"{w.id} {w.deployment.gpu.id} TP{w.deployment.engine.tensor_parallel_size} "
            f"kv {w.deployment.engine.kv_cache_dtype} q {w.deployment.engine.quantization} "
            f"seqs {w.deployment.engine.max_num_seqs} x{w.replicas} ${w.usd_per_hour:.2f}/h"
            if w else "none")
    print(f"{label:<22} {wall:7.1f} s  enumerated {r.enumerated}: {stages}")
    print(f"{'':<22} capacity searches {r.capacity_searches} ({r.probes} probes), "
          f"fleet runs {r.fleet_simulations}, simulated requests {r.sim_requests:,}")
    print(f"{'':<22} winner: {best}")


def _plan_doc(p: Any) -> str:
    from kvplan.report.plan_json import plan_json

    doc = plan_json(p)
    for key in ("executor", "workers", "wall_s"):
        doc["search_report"].pop(key)
    return json.dumps(doc, sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-exhaustive", action="store_true")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--no-margin", action="store_true")
    a = ap.parse_args()
    funnel, t_funnel = run("funnel", "local", a.workers)
    describe(f"funnel (local x{a.workers})", funnel, t_funnel)
    if not a.no_exhaustive:
        full, t_full = run("exhaustive", "local", a.workers)
        describe(f"exhaustive (local x{a.workers})", full, t_full)
        same = (funnel.winner and full.winner and funnel.winner.id == full.winner.id)
        print(f"funnel gain: {t_full / t_funnel:.1f}x wall, "
              f"{full.report.sim_requests / max(1, funnel.report.sim_requests):.1f}x simulated "
              f"requests; same winner: {bool(same)}")
    if not a.no_ray:
        ray_plan, t_ray = run("funnel", "ray", a.workers)
        describe(f"funnel (ray x{a.workers})", ray_plan, t_ray)
        print(f"ray / local wall: {t_ray / t_funnel:.2f}x (includes starting a local Ray "
              f"instance); identical plan JSON: {_plan_doc(ray_plan) == _plan_doc(funnel)}")
    if not a.no_margin:
        held, t_held = run("funnel", "local", a.workers, margin="band")
        describe(f"--slo-margin band (x{a.workers})", held, t_held)
        print(f"margin / none wall: {t_held / t_funnel:.2f}x (its search plus the one "
              f"without the margin); {_margin_cost(held)}")


def _margin_cost(p: Any) -> str:
    w, b = p.winner, p.without_margin
    if w is None or b is None:
        return "no winner with or without the margin"
    return (f"without it {b.id} x{b.replicas} ${b.usd_per_hour:.2f}/h; the margin adds "
            f"${w.usd_per_hour - b.usd_per_hour:.2f}/h")


if __name__ == "__main__":
    main()
