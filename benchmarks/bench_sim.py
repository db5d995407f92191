"""Time the simulator: azure-conv on Llama-3.1-8B / H100, and synthetic 10k/100k/1M requests.

Run: .venv/bin/python benchmarks/bench_sim.py [--repeat 5] [--sizes 10000,100000,1000000]
Prints min / median / max wall seconds per case, requests simulated per second, engine steps,
and peak RSS (each synthetic size runs in a fresh process so its peak is its own).
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


def _setup(dataset: str | None, n: int) -> tuple[Any, Any, Any]:
    from kvplan.analysis.serving import pick_profile, scheduler_limits
    from kvplan.costs.memory import plan_memory
    from kvplan.costs.roofline import StepCostModel
    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig
    from kvplan.specs.workload import WorkloadArgs, build_workload

    spec, hw, eng = load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100"), EngineConfig()
    plan = plan_memory(spec, hw, eng)
    if dataset:
        work = build_workload(WorkloadArgs(dataset=dataset))
    else:  # ~60% of the pool's throughput: a loaded but stable server
        work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=512,
                                           random_output_len=128, random_range_ratio=0.5,
                                           request_rate=20.0))
    timer = StepCostModel(spec, hw, eng, pick_profile(spec, hw, eng))  # as `kvplan simulate`
    kw = dict(timer=timer, num_blocks=plan.num_blocks, block_size=plan.block_size,
              kv=kv_shape_from_groups(plan.groups, plan.block_size),
              limits=scheduler_limits(plan.settings, eng),
              max_model_len=plan.settings.max_model_len)
    return work, kw, plan


def _time(dataset: str | None, n: int, repeat: int) -> dict[str, Any]:
    from kvplan.sim.simulator import simulate

    work, kw, _ = _setup(dataset, n)
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = simulate(work, **kw)
        walls.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    med = statistics.median(walls)
    return {"case": dataset or f"random-{n}", "requests": len(work), "steps": r.num_steps,
            "min_s": min(walls), "median_s": med, "max_s": max(walls),
            "requests_per_s": len(work) / med, "peak_rss_mib": rss / 2**20,
            "finished": int(r.finished.sum()), "preemptions": r.total_preemptions}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--big-repeat", type=int, default=1, help="repeats above 100k requests")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        ds, n = a.one.split(":")
        print(json.dumps(_time(ds or None, int(n), a.repeat)))
        return
    cases = [("azure-conv", 0, a.repeat)] + [
        ("", int(n), a.repeat if int(n) <= 100000 else a.big_repeat) for n in a.sizes.split(",")]
    print(f"{'case':<16}{'requests':>10}{'steps':>11}{'min s':>8}{'median s':>10}{'max s':>8}"
          f"{'req/s':>11}{'peak RSS MiB':>14}")
    for ds, n, rep in cases:
        out = subprocess.run([sys.executable, __file__, "--one", f"{ds}:{n}", "--repeat",
                              str(rep)], capture_output=True, text=True, check=True)
        d = json.loads(out.stdout)
        print(f"{d['case']:<16}{d['requests']:>10}{d['steps']:>11}{d['min_s']:>8.2f}"
              f"{d['median_s']:>10.2f}{d['max_s']:>8.2f}{d['requests_per_s']:>11,.0f}"
              f"{d['peak_rss_mib']:>14,.0f}")


if __name__ == "__main__":
    main()
