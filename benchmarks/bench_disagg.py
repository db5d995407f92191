"""Time a disaggregated 1P1D simulation of azure-conv next to the aggregated one, in one run.

Run: .venv/bin/python benchmarks/bench_disagg.py [--repeat 3]

Cases (Llama-3.1-8B, H100, CLI defaults, the bundled azure-conv trace, simulation only,
each in a fresh process):
  agg-core  simulate() of one aggregated server (the compiled core where it was built)
  agg-py    the same with KVPLAN_SIM_CORE=python (the pure-Python loop)
  disagg    simulate_disagg_serving(): 1 prefill + 1 decode instance of the same engine,
            ib-ndr link (the compiled fleet, sim/disagg/compiled.py, where the core was built)
  disagg-py the same with KVPLAN_SIM_CORE=python (the Python fleet, the reference)
The issue's target: disagg within 3x the aggregated simulation. Each is printed against both
aggregated cases; like with like: disagg / agg-core and disagg-py / agg-py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from case_rounds import report

MODEL = "meta-llama/Llama-3.1-8B"


def _case(name: str) -> dict[str, Any]:
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    work = build_workload(WorkloadArgs(dataset="azure-conv"))
    if name.startswith("disagg"):
        return _disagg(work)
    sys.path.insert(0, os.path.dirname(__file__))
    from bench_sim import _setup

    from kvplan.sim.simulator import simulate

    work, kw = _setup(MODEL, {}, WorkloadArgs(dataset="azure-conv"))
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(work, **kw)
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": r.num_steps}


def _disagg(work: Any) -> dict[str, Any]:
    from kvplan.analysis.disagg.serving import simulate_disagg_serving
    from kvplan.specs.catalog import load_model
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.serving import EngineConfig

    dep = Deployment(model=load_model(MODEL), gpu=load_gpu("H100"), engine=EngineConfig())
    dd = DisaggDeployment(prefill=dep, decode=dep, link=load_link("ib-ndr"))
    t0, c0 = time.perf_counter(), time.process_time()
    run = simulate_disagg_serving(dd, work)
    r = run.result
    return {"s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "steps": sum(x.num_steps for x in (*r.prefill, *r.decode))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case")
    args = ap.parse_args()
    if args.case:
        print(json.dumps(_case(args.case)))
        return
    report("disagg", "disagg", ["agg-core", "agg-py", "disagg", "disagg-py"], args.repeat,
           __file__, (), also=["disagg-py"])

if __name__ == "__main__":
    main()
