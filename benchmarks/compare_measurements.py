"""Compare the simulator with the published offline-throughput points we bundle.

The points (``src/kvplan/data/measurements/latency_calibration.json``, mode
``offline_max_throughput``) are TensorRT-LLM runs of Llama-3.1-8B FP8 on one H100: all requests
queued at t=0, FP8 weights and KV cache, ~0.95 of free memory for the cache. We replay the same
shape on the simulated vLLM server with matching flags and print predicted vs measured output
throughput and the error per point. TensorRT-LLM is not vLLM: read the errors as indicative.

Usage: python benchmarks/compare_measurements.py [--requests N]
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from typing import Any


def _points() -> list[dict[str, Any]]:
    path = resources.files("kvplan") / "data" / "measurements" / "latency_calibration.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    return [p for p in data["points"] if p["workload"]["mode"].startswith("offline")]


def _simulate(point: dict[str, Any], requests: int | None) -> float:
    from kvplan import EngineConfig, WorkloadArgs, compute_metrics, simulate_serving

    w = point["workload"]
    engine = EngineConfig(quantization="fp8", kv_cache_dtype="fp8", gpu_memory_utilization=0.95)
    args = WorkloadArgs(num_prompts=requests or w["num_requests"], random_input_len=w["input_len"],
                        random_output_len=w["output_len"])
    run = simulate_serving(point["model_config"].replace("--", "/"), point["gpu"], engine, args)
    return compute_metrics(run.result).output_throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=None, help="fewer requests (quick look)")
    ns = parser.parse_args()
    print(f"{'point':24s} {'in/out':>10s} {'measured':>10s} {'kvplan':>10s} {'error':>8s}")
    for p in _points():
        measured = p["metrics"]["output_throughput"]
        predicted = _simulate(p, ns.requests)
        shape = f"{p['workload']['input_len']}/{p['workload']['output_len']}"
        print(f"{p['id']:24s} {shape:>10s} {measured:>10,.0f} {predicted:>10,.0f} "
              f"{predicted / measured - 1:>+8.1%}")


if __name__ == "__main__":
    main()
