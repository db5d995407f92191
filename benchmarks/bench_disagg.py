"""Time a disaggregated 1P1D simulation of azure-conv next to the aggregated one, in one run.

Run: .venv/bin/python benchmarks/bench_disagg.py [--repeat 3] [--fleets]

Cases (Llama-3.1-8B, H100, CLI defaults, the bundled azure-conv trace, simulation only,
each in a fresh process):
  agg-core  simulate() of one aggregated server (the compiled core where it was built)
  agg-py    the same with KVPLAN_SIM_CORE=python (the pure-Python loop)
  disagg    simulate_disagg_serving(): 1 prefill + 1 decode instance of the same engine,
            ib-ndr link (the compiled fleet, sim/disagg/compiled.py, where the core was built)
  disagg-py the same with KVPLAN_SIM_CORE=python (the Python fleet, the reference)
The issue's target: disagg within 3x the aggregated simulation. Each is printed against both
aggregated cases; like with like: disagg / agg-core and disagg-py / agg-py.

--fleets times agg-core next to disagg-1P1D, disagg-2P1D, disagg-1P2D and disagg-2P2D (x
prefill and y decode instances of that engine, round robin), and disagg-1P2D-py (the Python
fleet, what ran 1P2D before the compiled fleet covered it), each against agg-core, with the
path that ran it (core: sim/disagg/compiled.py; python: it handed over): the simulation
like for like (simulate_disagg() with the pools' timers built, as agg-core's simulate() has
its timer built) and the whole call (with both pools' memory plans and timers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from case_rounds import report, rounds

MODEL = "meta-llama/Llama-3.1-8B"


def _case(name: str) -> dict[str, Any]:
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    work = build_workload(WorkloadArgs(dataset="azure-conv"))
    if name.startswith("disagg"):
        shape = name.removesuffix("-py").split("-")
        x, y = (1, 1) if len(shape) == 1 else map(int, shape[1][:-1].split("P"))
        return _disagg(work, x, y)
    sys.path.insert(0, os.path.dirname(__file__))
    from bench_sim import _setup

    from kvplan.sim.simulator import simulate

    work, kw = _setup(MODEL, {}, WorkloadArgs(dataset="azure-conv"))
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(work, **kw)
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": r.num_steps}


def _disagg(work: Any, x: int = 1, y: int = 1) -> dict[str, Any]:
    """simulate_disagg_serving()'s work, its two parts timed apart: the set-up (both pools'
    memory plans and timers, the link's cost) and the simulation (simulate_disagg(), what
    agg-core times of the aggregated server: its timer is built before its clock starts)."""
    from kvplan.analysis.disagg.serving import plan_pool, pool_sims, transfer_cost
    from kvplan.sim.disagg import compiled
    from kvplan.sim.disagg.fleet import simulate_disagg
    from kvplan.specs.catalog import load_model
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.serving import EngineConfig

    dep = Deployment(model=load_model(MODEL), gpu=load_gpu("H100"), engine=EngineConfig())
    dd = DisaggDeployment(prefill=replace(dep, replicas=x), decode=replace(dep, replicas=y),
                          link=load_link("ib-ndr"))
    path, real = ["python"], compiled.run

    def seen(fleet: Any) -> Any:
        got = real(fleet)
        path[0] = "python" if got is None else "core"
        return got
    compiled.run = seen
    t0, c0 = time.perf_counter(), time.process_time()
    pre, dec = plan_pool("prefill", dd.prefill), plan_pool("decode", dd.decode)
    pools = pool_sims(pre, dec, None)
    cost = transfer_cost(dd, dec.plan)
    t1, c1 = time.perf_counter(), time.process_time()
    r = simulate_disagg(work, prefill=pools[0], decode=pools[1], transfer=cost,
                        router=dd.router)
    t2, c2 = time.perf_counter(), time.process_time()
    return {"s": t2 - t0, "cpu_s": c2 - c0, "sim_s": t2 - t1, "sim_cpu_s": c2 - c1,
            "steps": sum(i.num_steps for i in (*r.prefill, *r.decode)), "path": path[0]}


FLEETS = ["agg-core", "disagg-1P1D", "disagg-2P1D", "disagg-1P2D", "disagg-2P2D",
          "disagg-1P2D-py"]


def fleets(repeat: int) -> None:
    """--fleets: every xPyD case against the aggregated core (module docstring): the
    simulation like for like (``sim``: the timers built before the clock starts, as
    agg-core's is) and the whole call (``all``: with both pools' plans and timers)."""
    _, runs = rounds(__file__, FLEETS, repeat)
    med = {n: {k: statistics.median(r.get(k, r[k.removeprefix("sim_")]) for r in runs[n])
               for k in ("s", "cpu_s", "sim_s", "sim_cpu_s")} for n in FLEETS}
    base = med["agg-core"]
    print(f"{'case':15s} {'path':6s} {'sim wall':>9s} {'sim cpu':>8s} {'all cpu':>8s} "
          f"{'steps':>7s}  sim / agg-core (wall, cpu)  all / agg-core (cpu)")
    for n in FLEETS:
        m = med[n]
        print(f"{n:15s} {runs[n][0].get('path', 'core'):6s} {m['sim_s']:8.3f}s "
              f"{m['sim_cpu_s']:7.3f}s {m['cpu_s']:7.3f}s {runs[n][0]['steps']:7d}  "
              f"{m['sim_s'] / base['s']:6.2f}x {m['sim_cpu_s'] / base['cpu_s']:6.2f}x"
              f"{'':14s}{m['cpu_s'] / base['cpu_s']:6.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case")
    ap.add_argument("--fleets", action="store_true", help="1P1D, 2P1D, 1P2D, 2P2D")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(_case(args.case)))
        return
    if args.fleets:
        fleets(args.repeat)
        return
    report("disagg", "disagg", ["agg-core", "agg-py", "disagg", "disagg-py"], args.repeat,
           __file__, (), also=["disagg-py"])

if __name__ == "__main__":
    main()
