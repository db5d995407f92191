"""Time compute_metrics and measure its memory peak, this checkout next to an older one.

Run: .venv/bin/python benchmarks/bench_metrics.py [--repeat 3] [--baseline DIR]
     [--sizes azure-conv,1000000]

Each case is a fresh process that simulates its workload (not timed), then runs
``compute_metrics`` with vLLM's default metrics (ttft, tpot, itl; p99) once for the time and
once under tracemalloc for the peak of what it allocates (numpy reports its buffers to
tracemalloc); the process's max RSS is printed too. Workloads: ``azure-conv`` (Llama-3.1-8B
on one H100, the bundled trace, CLI defaults) and N random requests (bench_sim.py's
random-10k recipe with N prompts: Llama-2-7B, input U[256, 768], output U[64, 192], 20 req/s,
seed 0, budget 512, 128 sequences). ``after`` is this checkout; ``before`` the checkout in
--baseline DIR run with its own .venv (e.g. the main branch). Figures: medians of --repeat
rounds, cases interleaved.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sim import LLAMA2, LLAMA3, _setup  # the same workloads

MIB = 1024 * 1024


def _one(size: str) -> dict[str, Any]:
    from kvplan.analysis.metrics import compute_metrics
    from kvplan.sim.simulator import simulate
    from kvplan.specs.requests.workload import WorkloadArgs

    if size == "azure-conv":
        work, kw = _setup(LLAMA3, {}, WorkloadArgs(dataset="azure-conv"))
    else:
        work, kw = _setup(LLAMA2, {"max_num_batched_tokens": 512, "max_num_seqs": 128},
                          WorkloadArgs(num_prompts=int(size), random_input_len=512,
                                       random_output_len=128, random_range_ratio=0.5,
                                       request_rate=20.0, seed=0))
    r = simulate(work, **kw)
    t0, c0 = time.perf_counter(), time.process_time()
    m = compute_metrics(r)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tracemalloc.start()
    compute_metrics(r)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    itl = m.stats["itl"]
    return {"s": wall, "cpu_s": cpu, "peak_mib": peak / MIB,
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "steps": r.num_steps, "mean_itl_ms": itl.mean_ms, "p99_itl_ms":
            itl.percentiles_ms[0][1], "median_itl_ms": itl.median_ms}


def _run(cmd: list[str]) -> dict[str, Any]:
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} failed: {p.stderr.strip()[-400:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", help="an older kvplan checkout with its own .venv")
    ap.add_argument("--sizes", default="azure-conv,1000000")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(_one(a.one)))
        return
    me = str(Path(__file__).resolve())
    trees = [("after", sys.executable)]
    if a.baseline:  # the older checkout imports its own kvplan (its venv's editable install)
        trees.append(("before", str(Path(a.baseline) / ".venv" / "bin" / "python")))
    cases = {f"{size} {tag}": [py, me, "--one", size]
             for size in a.sizes.split(",") for tag, py in trees}
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in cases}
    names = list(cases)
    for i in range(a.repeat):
        for n in names[i % len(names):] + names[:i % len(names)]:
            got[n].append(_run(cases[n]))
            print(f"  round {i + 1}/{a.repeat} {n}: {got[n][-1]['s']:.3f} s", file=sys.stderr)
    print(f"{'case':<22}{'metrics s':>10}{'cpu s':>8}{'peak MiB':>10}{'RSS MiB':>9}"
          f"{'steps':>10}  mean / median / p99 ITL ms")
    med: dict[str, dict[str, float]] = {}
    for n, runs in got.items():
        med[n] = {k: statistics.median(r[k] for r in runs) for k in ("s", "cpu_s", "peak_mib",
                                                                    "rss_mib")}
        x = runs[0]
        print(f"{n:<22}{med[n]['s']:>10.3f}{med[n]['cpu_s']:>8.3f}{med[n]['peak_mib']:>10.1f}"
              f"{med[n]['rss_mib']:>9.0f}{x['steps']:>10}  {x['mean_itl_ms']!r} / "
              f"{x['median_itl_ms']!r} / {x['p99_itl_ms']!r}")
    for size in a.sizes.split(","):
        old, new = med.get(f"{size} before"), med.get(f"{size} after")
        if old and new:
            print(f"  {size}: metrics {old['s'] / new['s']:.1f}x faster, peak "
                  f"{old['peak_mib'] / max(new['peak_mib'], 1e-9):.1f}x smaller, RSS "
                  f"{old['rss_mib']:.0f} -> {new['rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
