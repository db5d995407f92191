"""Held-out check of offline max throughput: TensorRT-LLM's perf-overview runs, never fitted.

    .venv/bin/python benchmarks/offline_throughput_report.py [--only 8B|FP4] [--points] [--kv-auto]
    .venv/bin/python benchmarks/offline_throughput_report.py --help     # this text

The 100 ``offline_max_throughput`` points of latency_calibration.json (Llama-3.1 8B / 70B /
405B FP8 on H100 and H200, TP 1-8; Llama-3.3 70B / 3.1 405B NVFP4 on B200 and GB200, TP 1 and 4;
``trtllm-bench throughput``: every request queued at t = 0, fixed lengths; fp8 KV cache; FP4
checkpoints priced as vLLM's ``modelopt_fp4``) are simulated on kvplan's scheduler under the
bundled profile (the point's GPU at its precision) with
TensorRT-LLM's host costs (default.json ``engines.trtllm``; no API path: trtllm-bench drives
the runtime in-process), and the printed total output throughput is compared with kvplan's.
Scheduler limits stand for trtllm-bench's: 2,048 sequences, 8,192 tokens per step, the KV
cache at 95% of the memory (its ``kv_cache_free_gpu_mem_fraction`` 0.95 of what the weights
leave). Prints per-point errors and the median |predicted / measured - 1| per model and GPU.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from statistics import median

from kvplan import jsonread
from kvplan.analysis.calibration.public_set import _data_text, serving_replay
from kvplan.costs.step.profiles import default_profiles
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig

MAX_SEQS, MAX_TOKENS, MEMORY = 2048, 8192, 0.95
KV = "auto" if "--kv-auto" in sys.argv else "fp8"
"""NVIDIA's ModelOpt FP8 checkpoints (nvidia/Llama-3.1-*-FP8) carry ``kv_cache_quant_algo``
FP8, so TensorRT-LLM stores their KV cache in fp8 (``--kv-auto``: 16-bit, for comparison); the
FP4 rows' page does not say, and they are priced the same way."""
QUANT = {"FP8": ("fp8", "fp8"), "FP4": ("modelopt_fp4", "fp4")}
"""A point's ``precision`` -> (vLLM --quantization, profile precision)."""


def offline_points() -> list[dict]:
    pts = jsonread.loads(_data_text("latency_calibration.json"))["points"]
    return [p for p in pts if p["workload"]["mode"].startswith("offline_max_throughput")]


def predict(p: dict) -> float:
    """kvplan's output throughput (tok/s, whole TP group) for one offline point."""
    w = p["workload"]
    quantization, precision = QUANT[p["precision"]]
    engine = EngineConfig(tensor_parallel_size=int(p["tp"]), quantization=quantization,
                          kv_cache_dtype=KV, max_num_seqs=MAX_SEQS,
                          max_num_batched_tokens=MAX_TOKENS, gpu_memory_utilization=MEMORY)
    model = p["model_config"].replace("--", "/")
    workload = build_workload(WorkloadArgs(num_prompts=int(w["num_requests"]),
                                           random_input_len=int(w["input_len"]),
                                           random_output_len=int(w["output_len"])))
    replay = serving_replay(model, p["gpu"], engine, workload)
    host = json.loads(_data_text_profile())["engines"]["trtllm"]
    profile = replace(default_profiles().pick(p["gpu"], precision), **host)
    return replay.metrics(profile)["output_throughput_tok_s"]


def _data_text_profile() -> str:
    from kvplan import input_file

    return input_file.read_text(input_file.package_file("data", "profiles", "default.json"))


def main() -> None:
    if "--help" in sys.argv or "-h" in sys.argv:
        print(__doc__)
        return
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    t0, rows = time.perf_counter(), []
    for p in offline_points():
        if only and only not in f'{p["model_config"]} {p["precision"]} {p["gpu"]}':
            continue
        pred = predict(p)
        meas = float(p["metrics"]["output_throughput"])
        w = p["workload"]
        rows.append((p["id"], f'{p["model_config"]} {p["precision"]}', p["gpu"], p["tp"],
                     f"{w['input_len']}/{w['output_len']}", meas, pred, pred / meas - 1))
        if "--points" in sys.argv:
            r = rows[-1]
            print(f"{r[0]:24s} {r[1]:28s} {r[2]:15s} tp{r[3]} {r[4]:>10s} "
                  f"measured {r[5]:>8.0f} kvplan {r[6]:>8.0f} {r[7]:+.0%}", flush=True)
    print("\n| model | GPU | TP | points | median abs error | median signed |")
    print("|---|---|---|---|---|---|")
    for key in sorted({(r[1], r[2], r[3]) for r in rows}):
        errs = [r[7] for r in rows if (r[1], r[2], r[3]) == key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {len(errs)} | "
              f"{median(abs(e) for e in errs):.1%} | {median(errs):+.1%} |")
    errs = [r[7] for r in rows]
    print(f"| all | | | {len(errs)} | {median(abs(e) for e in errs):.1%} | "
          f"{median(errs):+.1%} |")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
