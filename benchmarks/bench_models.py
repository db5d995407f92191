"""The simulation loop per model: compiled core vs the pure-Python loop, per step, next to
dense Llama-2-7B on the core (perf-3.md section 2's table, re-run in one sitting).

Run: .venv/bin/python benchmarks/bench_models.py [--repeat 3] [--num-prompts 10000]

Workload (bench_sim.py's random-10k): input U[256, 768], output U[64, 192], Poisson 20 req/s,
seed 0, max_num_batched_tokens 512, max_num_seqs 128, set up as `kvplan simulate` does
(plan_memory's KV groups and blocks, the bundled latency profile). Each case is a fresh
process timing ``simulate()`` alone (CPU seconds); ``core`` is this checkout as built,
``python`` the same with KVPLAN_SIM_CORE=python, ``before`` the checkout in --baseline DIR
(its own .venv). Rounds interleave the cases; medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODELS = [  # (model, GPU, TP, block size): perf-3.md's set
    ("meta-llama/Llama-2-7b-hf", "H100", 1, 16),
    ("google/gemma-3-27b-it", "H100", 1, 16),
    ("openai/gpt-oss-120b", "H100", 1, 16),
    ("Qwen/Qwen3-Next-80B-A3B-Thinking", "H100", 4, None),
    ("deepseek-ai/DeepSeek-V3", "H200", 8, 64),
    ("deepseek-ai/DeepSeek-V2-Lite", "H100", 1, 64),
]


def _one(index: int, n: int) -> dict[str, Any]:
    from kvplan.analysis.serving import pick_profile, scheduler_limits
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.sim import core
    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.sim.simulator import simulate
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.serving import EngineConfig

    name, gpu, tp, block = MODELS[index]
    spec, hw = load_model(name), load_gpu(gpu)
    extra = {} if block is None else {"block_size": block}
    eng = EngineConfig(tensor_parallel_size=tp, max_num_batched_tokens=512, max_num_seqs=128,
                       **extra)
    plan = plan_memory(spec, hw, eng)
    work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=512,
                                       random_output_len=128, random_range_ratio=0.5,
                                       request_rate=20.0, seed=0))
    calls = [0]
    real = core.run

    def counting(*a: Any) -> Any:
        calls[0] += 1
        return real(*a)

    core.run = counting  # type: ignore[assignment]  # (a fresh process: nothing to restore)
    c0 = time.process_time()
    r = simulate(work, timer=StepCostModel(spec, hw, eng, pick_profile(spec, hw, eng)),
                 num_blocks=plan.num_blocks, block_size=plan.block_size, engine=eng,
                 kv=kv_shape_from_groups(plan.groups, plan.block_size),
                 limits=scheduler_limits(plan.settings, eng),
                 max_model_len=plan.settings.max_model_len)
    cpu = time.process_time() - c0
    return {"cpu_s": cpu, "steps": r.num_steps, "compiled": bool(calls[0]),
            "preemptions": r.total_preemptions, "groups": len(plan.groups)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--num-prompts", type=int, default=10000)
    ap.add_argument("--baseline", help="an older kvplan checkout with its own .venv")
    ap.add_argument("--models", help="comma-separated indexes into MODELS (default: all)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        i, n = a.one.split(":")
        print(json.dumps(_one(int(i), int(n))))
        return
    me = str(Path(__file__).resolve())
    trees = [("core", [sys.executable]),
             ("python", ["env", "KVPLAN_SIM_CORE=python", sys.executable])]
    if a.baseline:
        trees.append(("before", [str(Path(a.baseline) / ".venv" / "bin" / "python")]))
    pick = range(len(MODELS)) if not a.models else [int(x) for x in a.models.split(",")]
    cases = {}
    for i in pick:
        for tag, py in trees:
            cases[(MODELS[i][0], tag)] = [*py, me, "--one", f"{i}:{a.num_prompts}"]
    got: dict[tuple[str, str], list[dict[str, Any]]] = {k: [] for k in cases}
    keys = list(cases)
    for r in range(a.repeat):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            p = subprocess.run(cases[k], capture_output=True, text=True, check=False)
            if p.returncode:
                raise SystemExit(f"error: {k} failed: {p.stderr.strip()[-400:]}")
            got[k].append(json.loads(p.stdout.strip().splitlines()[-1]))
            print(f"  round {r + 1}/{a.repeat} {k}: {got[k][-1]['cpu_s']:.3f} s", file=sys.stderr)
    _report(got)


def _report(got: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    med = {k: statistics.median(x["cpu_s"] for x in v) for k, v in got.items()}
    per = {k: med[k] / max(v[0]["steps"], 1) * 1e6 for k, v in got.items()}
    dense = per.get((MODELS[0][0], "core"), 0.0) or float("nan")
    print(f"{'model':<36}{'loop':>7}{'in C':>6}{'CPU s':>9}{'steps':>9}{'us/step':>9}"
          f"{'x dense core/step':>19}{'before/core':>13}")
    for (name, tag), v in got.items():
        other = med.get((name, "before" if (name, "before") in med else "python"))
        speed = f"{other / med[(name, tag)]:.1f}x" if tag == "core" and other else ""
        print(f"{name:<36}{tag:>7}{'yes' if v[0]['compiled'] else 'no':>6}"
              f"{med[(name, tag)]:>9.4f}{v[0]['steps']:>9}{per[(name, tag)]:>9.2f}"
              f"{per[(name, tag)] / dense:>19.2f}{speed:>13}")


if __name__ == "__main__":
    main()
