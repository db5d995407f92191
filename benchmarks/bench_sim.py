"""Time the simulator end to end and its loop, next to sched-sim and an older kvplan, in one run.

Run: .venv/bin/python benchmarks/bench_sim.py [--repeat 5] [--baseline DIR] [--no-sched-sim]
     [--sched-sim VENV]

Workloads (perf-2.md):
  random-10k  Llama-2-7B on one H100, 10,000 requests: input U[256, 768], output U[64, 192],
              Poisson 20 req/s, seed 0; max_num_batched_tokens 512, max_num_seqs 128.
              sched-sim gets the same requests (JSON) and Llama-2-7B's dimensions on H100.
  azure-conv  Llama-3.1-8B on one H100, the bundled trace, CLI defaults.
  small       simulate() on 200 random requests, setup included (what the planner repeats).

Cases: ``cli`` is the tool's own command line (a fresh process, wall time); ``loop`` is the
simulation alone in a fresh process (kvplan: simulate(); sched-sim: Simulator.run(), which
includes its metrics). ``after`` is this checkout as installed (the compiled core where it
was built, docs/simulator.md), ``after-py`` the same with KVPLAN_SIM_CORE=python (the
pure-Python loop). ``before`` runs the same cases on the kvplan checkout in --baseline DIR
(its own .venv, e.g. `git worktree add DIR main` + scripts/setup.sh there). Every case runs
once per round, the order rotated each round; medians are printed with ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LLAMA2, LLAMA3 = "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-3.1-8B"
RANDOM_FLAGS = ["--dataset", "random", "--random-input-len", "512", "--random-output-len", "128",
                "--random-range-ratio", "0.5", "--num-prompts", "10000", "--request-rate", "20",
                "--seed", "0", "--max-num-batched-tokens", "512", "--max-num-seqs", "128"]
H100_LLAMA2 = {  # sched-sim's HardwareProfile: its h100 preset with Llama-2-7B's dimensions
    "name": "H100 SXM5, Llama-2-7B", "vram_gb": 80.0, "memory_bandwidth_gb_s": 3350.0,
    "fp16_tflops": 989.0, "tensor_core_efficiency": 0.55, "kernel_launch_overhead_ms": 0.03,
    "pcie_bandwidth_gb_s": 128.0, "network_bandwidth_gbps": 400.0,
    "model_name": LLAMA2, "parameter_count_billions": 6.74, "num_layers": 32,
    "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 32, "head_dim": 128, "dtype_bytes": 2}


# --------------------------------------------------------------------------- in a subprocess

def _random_args() -> Any:
    from kvplan.specs.requests.workload import WorkloadArgs

    return WorkloadArgs(num_prompts=10000, random_input_len=512, random_output_len=128,
                        random_range_ratio=0.5, request_rate=20.0, seed=0)


def _setup(model: str, engine_kw: dict[str, Any], wargs: Any) -> tuple[Any, dict[str, Any]]:
    from kvplan.analysis.serving import pick_profile, scheduler_limits
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.sim.blocks import kv_shape_from_groups
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.requests.workload import build_workload
    from kvplan.specs.serving import EngineConfig

    spec, hw, eng = load_model(model), load_gpu("H100"), EngineConfig(**engine_kw)
    plan = plan_memory(spec, hw, eng)
    timer = StepCostModel(spec, hw, eng, pick_profile(spec, hw, eng))  # as `kvplan simulate`
    kw = dict(timer=timer, num_blocks=plan.num_blocks, block_size=plan.block_size,
              kv=kv_shape_from_groups(plan.groups, plan.block_size),
              limits=scheduler_limits(plan.settings, eng),
              max_model_len=plan.settings.max_model_len)
    return build_workload(wargs), kw


def _kvplan_loop(workload: str) -> dict[str, Any]:
    from kvplan.sim.simulator import simulate
    from kvplan.specs.requests.workload import WorkloadArgs

    if workload == "azure-conv":
        work, kw = _setup(LLAMA3, {}, WorkloadArgs(dataset="azure-conv"))
    else:
        work, kw = _setup(LLAMA2, {"max_num_batched_tokens": 512, "max_num_seqs": 128},
                          _random_args())
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(work, **kw)
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": r.num_steps,
            "ttft_sum_s": float((r.first_token_s - r.sent_s)[r.finished].sum())}


def _kvplan_small() -> dict[str, Any]:
    """Median seconds of one simulate() call on 200 requests, the timer and plan built once."""
    from kvplan.sim.simulator import simulate
    from kvplan.specs.requests.workload import WorkloadArgs

    args = WorkloadArgs(num_prompts=200, random_input_len=512, random_output_len=128,
                        random_range_ratio=0.5, request_rate=20.0, seed=0)
    work, kw = _setup(LLAMA2, {"max_num_batched_tokens": 512, "max_num_seqs": 128}, args)
    walls, cpus = [], []
    for _ in range(30):
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate(work, **kw)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "steps": r.num_steps}


def _schedsim_loop(trace: str, hardware: str) -> dict[str, Any]:
    from sched_sim.core.event_engine import Simulator
    from sched_sim.hardware.presets import get_hardware_profile
    from sched_sim.schedulers.factory import create_scheduler
    from sched_sim.workloads.trace_loader import load_trace_file

    hw = get_hardware_profile(hardware)
    sim = Simulator(hw, create_scheduler("chunked", hw, token_budget=512,
                                         enable_prefix_caching=False))
    sim.submit_workload(load_trace_file(trace))
    t0, c0 = time.perf_counter(), time.process_time()
    sim.run()
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": len(sim.iteration_records)}


# --------------------------------------------------------------------------- the driver

def _write_inputs(tmp: Path) -> tuple[Path, Path]:
    from kvplan.specs.requests.workload import build_workload

    w = build_workload(_random_args())
    rows = [{"id": f"r{i}", "timestamp": a, "prompt_tokens": p, "output_tokens": o}
            for i, (a, p, o) in enumerate(zip(w.arrival_s.tolist(), w.prompt_tokens.tolist(),
                                              w.output_tokens.tolist(), strict=True))]
    trace, hw = tmp / "w10000.json", tmp / "h100-llama2-7b.json"
    trace.write_text(json.dumps(rows))
    hw.write_text(json.dumps(H100_LLAMA2))
    return trace, hw


def _cases(a: argparse.Namespace, trace: Path, hw: Path) -> dict[str, list[str]]:
    """Case name -> command line; each prints one JSON object or is timed by wall clock."""
    me = str(Path(__file__).resolve())
    trees = [("after", [sys.executable]),
             ("after-py", ["env", "KVPLAN_SIM_CORE=python", sys.executable])]
    if a.baseline:
        trees.append(("before", [str(Path(a.baseline) / ".venv" / "bin" / "python")]))
    out: dict[str, list[str]] = {}
    for tag, py in trees:
        out[f"cli random-10k {tag}"] = [*py, "-m", "kvplan", "simulate", LLAMA2, "--gpu",
                                        "H100", *RANDOM_FLAGS, "--json"]
        out[f"cli azure-conv {tag}"] = [*py, "-m", "kvplan", "simulate", LLAMA3, "--gpu",
                                        "H100", "--dataset", "azure-conv", "--json"]
        out[f"loop random-10k {tag}"] = [*py, me, "--one", "loop:random-10k"]
        out[f"loop azure-conv {tag}"] = [*py, me, "--one", "loop:azure-conv"]
        out[f"call small {tag}"] = [*py, me, "--one", "small"]
    bindir = Path(a.sched_sim) / "bin" if a.sched_sim else Path(sys.executable).parent
    sched = shutil.which("sched-sim", path=str(bindir))
    if sched and not a.no_sched_sim:
        out["cli random-10k sched-sim"] = [sched, "trace", str(trace), "--scheduler", "chunked",
                                           "--hardware", str(hw), "--token-budget", "512",
                                           "--no-gantt"]
        out["loop random-10k sched-sim"] = [str(bindir / "python"), me, "--one",
                                            f"schedsim:{trace}:{hw}"]
    return out


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_case(name: str, cmd: list[str]) -> dict[str, Any]:
    c0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit(f"error: {name} failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    if name.startswith("cli"):
        return {"s": wall, "cpu_s": cpu}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def _rounds(cases: dict[str, list[str]], repeat: int) -> dict[str, list[dict[str, Any]]]:
    names = list(cases)
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i in range(repeat):
        order = names[i % len(names):] + names[:i % len(names)]
        for n in order:
            got[n].append(_run_case(n, cases[n]))
            print(f"  round {i + 1}/{repeat} {n}: {got[n][-1]['s']:.3f} s", file=sys.stderr)
    return got


def _report(got: dict[str, list[dict[str, Any]]]) -> None:
    med = {n: statistics.median(r["s"] for r in runs) for n, runs in got.items()}
    cpu = {n: statistics.median(r["cpu_s"] for r in runs) for n, runs in got.items()}
    print(f"{'case':<30}{'wall min':>9}{'median':>9}{'max':>9}{'cpu median':>11}{'steps':>9}")
    for n, runs in got.items():
        s = [r["s"] for r in runs]
        print(f"{n:<30}{min(s):>9.3f}{med[n]:>9.3f}{max(s):>9.3f}{cpu[n]:>11.3f}"
              f"{runs[0].get('steps', ''):>9}")
    for label, table in (("wall", med), ("cpu", cpu)):
        print(f"\nratios of {label}-time medians (x = times faster; from this one run)")
        _ratios(table)


def _ratios(med: dict[str, float]) -> None:
    pairs = (("after", "before"), ("after", "sched-sim"), ("after-py", "sched-sim"),
             ("before", "sched-sim"), ("after", "after-py"))
    for what in ("cli random-10k", "loop random-10k", "cli azure-conv", "loop azure-conv",
                 "call small"):
        parts = []
        for fast, slow in pairs:
            x, y = med.get(f"{what} {fast}"), med.get(f"{what} {slow}")
            if x and y:
                parts.append(f"{fast} vs {slow} {y / x:5.2f}x")
        if parts:
            print(f"  {what:<18} " + "; ".join(parts))


def _one(spec: str) -> None:
    kind, _, rest = spec.partition(":")
    if kind == "loop":
        out = _kvplan_loop(rest)
    elif kind == "small":
        out = _kvplan_small()
    else:
        trace, _, hw = rest.partition(":")
        out = _schedsim_loop(trace, hw)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", help="a kvplan checkout with its own .venv (the 'before')")
    ap.add_argument("--no-sched-sim", action="store_true")
    ap.add_argument("--sched-sim", help="a venv of its own with sched-sim installed (else this "
                    "venv's)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(a.one)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trace, hw = _write_inputs(Path(tmp))
        cases = _cases(a, trace, hw)
        if not any("sched-sim" in n for n in cases) and not a.no_sched_sim:
            print("sched-sim is not installed in this venv (pip install sched-sim): "
                  "its cases are left out", file=sys.stderr)
        _report(_rounds(cases, a.repeat))


if __name__ == "__main__":
    main()
