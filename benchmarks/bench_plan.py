"""Time kvplan plan: Llama-3.1-70B on the azure-conv trace at its own rate, next to an older tree.

Run: .venv/bin/python benchmarks/bench_plan.py [--workers 2] [--rounds 3] [--baseline DIR]
     [--cases funnel-240,funnel,exhaustive,ray-240,ray,margin]

The space: 5 GPU types x TP 1,2,4,8 x KV auto,fp8 x weights bf16,fp8 x max-num-seqs
128,256,default = 240 configurations (``*-240``: one chunk size, vLLM's default) or x the
default chunk sizes 512,2048,default = 720 configurations (the others). Cases:
``funnel``, ``exhaustive`` (``--search exhaustive``: the ratio is the funnel's gain),
``ray`` (``--executor ray``: its overhead against local), ``margin`` (``--slo-margin band``).

Every case is a fresh process (no memo or import carried over), once per round, the order
rotated each round; ``after`` is this checkout, ``before`` the checkout in --baseline DIR with
its own .venv (e.g. `git worktree add DIR main` + scripts/setup.sh there), running this same
script. Prints per case the counts per funnel stage, the simulated requests, the winner, the
median wall and CPU (the case's process and its worker processes; Ray's daemons are not
counted), and whether after and before wrote the identical plan JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
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
CASES = {  # name -> (search, executor, margin, one chunk size)
    "funnel-240": ("funnel", "local", "none", True),
    "funnel": ("funnel", "local", "none", False),
    "exhaustive": ("exhaustive", "local", "none", False),
    "ray-240": ("funnel", "ray", "none", True),
    "ray": ("funnel", "ray", "none", False),
    "margin": ("funnel", "local", "band", False),
}


def run(search: str, executor: str, workers: int, margin: str = "none",
        one_chunk: bool = False) -> tuple[Any, float]:
    import kvplan

    slo = kvplan.Slo(bounds=kvplan.parse_slo(SLO))
    space = {**SPACE, "max_num_batched_tokens": [None]} if one_chunk else SPACE
    t0 = time.perf_counter()
    p = kvplan.plan(MODEL, kvplan.WorkloadArgs(dataset="azure-conv"), slo, search=search,
                    executor=executor, workers=workers, slo_margin=margin, **space)
    return p, time.perf_counter() - t0


def _plan_doc(p: Any) -> str:
    from kvplan.report.plan.plan_json import plan_json

    doc = plan_json(p)
    for key in ("executor", "workers", "wall_s"):
        doc["search_report"].pop(key)
    return json.dumps(doc, sort_keys=True)


def _one(case: str, workers: int) -> None:
    """One case in this process: print its figures as one JSON line."""
    search, executor, margin, one_chunk = CASES[case]
    p, wall = run(search, executor, workers, margin, one_chunk)
    r, w = p.report, p.winner
    best = (f"{w.id} {w.deployment.gpu.id} TP{w.deployment.engine.tensor_parallel_size} "
            f"kv {w.deployment.engine.kv_cache_dtype} q {w.deployment.engine.quantization} "
            f"seqs {w.deployment.engine.max_num_seqs} chunk "
            f"{w.deployment.engine.max_num_batched_tokens} x{w.replicas} "
            f"${w.usd_per_hour:.2f}/h" if w else "none")
    print(json.dumps({
        "s": wall, "enumerated": r.enumerated,
        "stages": ", ".join(f"{k} {v}" for k, v in r.stage_counts if v),
        "searches": f"{r.capacity_searches} ({r.probes} probes), fleet runs "
                    f"{r.fleet_simulations}, simulated requests {r.sim_requests:,}",
        "winner": best, "doc": hashlib.sha256(_plan_doc(p).encode()).hexdigest()[:16]}))


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run_case(cmd: list[str]) -> dict[str, Any]:
    c0, t0 = _children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
    if p.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {p.stderr.strip()[-600:]}")
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "process_s": wall, "cpu_s": cpu}


def _rounds(a: argparse.Namespace) -> dict[tuple[str, str], list[dict[str, Any]]]:
    me = str(Path(__file__).resolve())
    trees = [("after", sys.executable)]
    if a.baseline:
        trees.append(("before", str(Path(a.baseline) / ".venv" / "bin" / "python")))
    keys = [(case, tag) for case in a.cases.split(",") for tag, _ in trees]
    py = dict(trees)
    got: dict[tuple[str, str], list[dict[str, Any]]] = {k: [] for k in keys}
    for i in range(a.rounds):
        for case, tag in keys[i % len(keys):] + keys[:i % len(keys)]:
            got[(case, tag)].append(_run_case([py[tag], me, "--one", case,
                                               "--workers", str(a.workers)]))
            print(f"  round {i + 1}/{a.rounds} {case} {tag}: "
                  f"{got[(case, tag)][-1]['s']:.2f} s", file=sys.stderr)
    return got


def _report(got: dict[tuple[str, str], list[dict[str, Any]]]) -> None:
    med = {k: statistics.median(r["s"] for r in runs) for k, runs in got.items()}
    for (case, tag), runs in got.items():
        s, first = [r["s"] for r in runs], runs[0]
        c = [r["cpu_s"] for r in runs]
        print(f"{case:<11} {tag:<7} plan wall median {med[(case, tag)]:6.2f} s "
              f"(min {min(s):.2f}, max {max(s):.2f}); process CPU median "
              f"{statistics.median(c):.2f} s (min {min(c):.2f}, max {max(c):.2f}); "
              f"enumerated {first['enumerated']}: {first['stages']}")
        print(f"{'':<20}capacity searches {first['searches']}; winner {first['winner']}; "
              f"plan JSON {first['doc']} (same every round: "
              f"{len({r['doc'] for r in runs}) == 1})")
    print("\nratios of median plan wall (x = times faster; this one run)")
    for case in dict.fromkeys(c for c, _ in got):
        a, b = med.get((case, "after")), med.get((case, "before"))
        if a and b:
            same = got[(case, "after")][0]["doc"] == got[(case, "before")][0]["doc"]
            print(f"  {case:<11} after vs before {b / a:5.2f}x; identical plan JSON: {same}")
    for fast, slow in (("funnel", "exhaustive"), ("funnel", "ray"), ("funnel-240", "ray-240")):
        for tag in ("after", "before"):
            a, b = med.get((fast, tag)), med.get((slow, tag))
            if a and b:
                print(f"  {tag:<6} {slow} / {fast} wall: {b / a:5.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a kvplan checkout with its own .venv (the 'before')")
    ap.add_argument("--cases", default="funnel-240,funnel,exhaustive,ray,margin")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        _one(a.one, a.workers)
        return
    unknown = set(a.cases.split(",")) - set(CASES)
    if unknown:
        raise SystemExit(f"error: --cases: unknown {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(CASES)}")
    _report(_rounds(a))


if __name__ == "__main__":
    main()
