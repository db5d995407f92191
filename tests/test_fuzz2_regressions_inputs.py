"""fuzz-2 F10-F16, F18, F19: malformed or absurd input files and values give one ``error:``
line naming the field or file and the allowed range; never a traceback or a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fuzz2_support import (
    CFG1B,
    L1B,
    MCSV,
    Files,
    assert_error,
    bench,
    config,
    gpu_file,
    profile,
    run_case,
)

LAT = ["latency", L1B, "--gpu", "H100", "--prompt", "512", "--output", "32"]
LAT_GPU = ["latency", L1B, "--gpu", "gpu.yaml", "--prompt", "512", "--output", "32"]
TRACE = ["simulate", L1B, "--trace", "t.csv", "--trace-columns",
         "arrival=ts,input=in,output=out"]
HEAD = "model,gpu,batch,prompt,output,ttft_ms"


def _point(**fields: object) -> str:
    return json.dumps([{"model": L1B, "gpu": "H100", "batch": 1, "prompt": 512, "output": 64,
                        "ttft_ms": 12, **fields}])


CASES: dict[str, tuple[list[str], Files, tuple[str, ...]]] = {
    # F10: size strings that overflow
    "F10-1e309": (["capacity", L1B, "--kv-cache-memory", "1e309"], {}, ("too large",)),
    "F10-1e400": (["capacity", L1B, "--kv-cache-memory", "1e400"], {}, ("too large",)),
    "F10-1e300TiB": (["capacity", L1B, "--kv-cache-memory", "1e300TiB"], {}, ("too large",)),
    "F10-simulate-1e30": (["simulate", "google/gemma-3-27b-it", "--kv-cache-memory", "1e30",
                           "--num-prompts", "5"], {}, ("too large",)),
    # F11: config.json
    "F11-deep": (["kv", "config.json"], {"config.json": "[" * 100_000 + "]" * 100_000},
                 ("config.json", "nested too deeply")),
    "F11-5000-digits": (["kv", "config.json"],
                        {"config.json": CFG1B.rstrip().rstrip("}") + ', "big": ' + "9" * 5000
                         + "}"}, ("config.json", "5000 digits")),
    "F11-nan-layers": (["kv", "config.json"], {"config.json": CFG1B.replace(
        '"num_hidden_layers": 16', '"num_hidden_layers": NaN')}, ("num_hidden_layers", "nan")),
    "F11-inf-hidden": (["kv", "config.json"], {"config.json": CFG1B.replace(
        '"hidden_size": 2048', '"hidden_size": Infinity')}, ("hidden_size", "inf")),
    "F11-layer-type-objects": (["kv", "config.json"], {"config.json": config(
        layer_types=[{"type": "full_attention"}] * 16)}, ("layer_types",)),
    "F11-block-strings": (["kv", "config.json"], {"config.json": config(quantization_config={
        "quant_method": "fp8", "weight_block_size": ["a", "b"]})}, ("weight_block_size",)),
    "F11-block-null": (["kv", "config.json"], {"config.json": config(quantization_config={
        "quant_method": "fp8", "weight_block_size": [None, 128]})}, ("weight_block_size",)),
    "F11-block-zero": (["capacity", "config.json"], {"config.json": config(quantization_config={
        "quant_method": "fp8", "weight_block_size": [0, 0]})}, ("weight_block_size", "[1, ")),
    "F11-window-text": (["kv", "config.json"], {"config.json": config(sliding_window="4096")},
                        ("sliding_window", "whole number")),
    "F11-head-dim-1e308": (["capacity", "config.json"], {"config.json": config(head_dim=1e308)},
                           ("head_dim", "at most 2,147,483,647")),
    # F12: a model argument longer than a file name may be
    "F12-kv": (["kv", "a" * 300], {}, ("unknown model",)),
    "F12-capacity": (["capacity", "a" * 300], {}, ("unknown model",)),
    "F12-simulate": (["simulate", "a" * 300, "--num-prompts", "2"], {}, ("unknown model",)),
    "F12-path": (["kv", "d/" + "a" * 300 + ".json"], {}, ("no such config file",)),
    # F13: GPU files
    "F13-not-utf8": (["capacity", L1B, "--gpu", "gpu.yaml"], {"gpu.yaml": b"\xff\xfe\x80id: x"},
                     ("gpu.yaml", "not UTF-8 text (byte 0xff at offset 0)")),
    "F13-memory-inf": (["capacity", L1B, "--gpu", "gpu.yaml"],
                       {"gpu.yaml": gpu_file(memory_gb=".inf")}, ("memory_gb", "[1, 10000]")),
    "F13-bandwidth-inf": (LAT_GPU, {"gpu.yaml": gpu_file(mem_bw_tbps=".inf")},
                          ("mem_bw_tbps", "[0.01, 1000]")),
    # F14: profile files
    "F14-not-utf8": ([*LAT, "--profile", "p.json"], {"p.json": b"\xff\xfe\x80"},
                     ("p.json", "not UTF-8 text (byte 0xff at offset 0)")),
    "F14-profiles-5": ([*LAT, "--profile", "p.json"], {"p.json": profile(profiles=5)},
                       ("'profiles' must be a list",)),
    "F14-gpu-5": ([*LAT, "--profile", "p.json"], {"p.json": profile(first={"gpu": 5})},
                  ("profiles[0]", "gpu must be a string")),
    "F14-precision-list": ([*LAT, "--profile", "p.json"],
                           {"p.json": profile(first={"precision": []})},
                           ("precision must be a string",)),
    # F15: trace counts above int64
    "F15": (TRACE, {"t.csv": "ts,in,out\n0,99999999999999999999,10\n"},
            ("t.csv, line 2, column 'in'", "100,000,000")),
    # F16: calibrate measurement files
    "F16-workload-null": (["calibrate", "m.json"], {"m.json": json.dumps(
        {"points": [{"workload": None}]})}, ("m.json",)),
    "F16-workload-text": (["calibrate", "m.json"], {"m.json": json.dumps(
        {"points": [{"workload": "static_batch"}]})}, ("'workload' must be an object",)),
    "F16-metrics-5": (["calibrate", "m.json"], {"m.json": json.dumps({"points": [{
        "id": "x", "model_config": L1B, "gpu": "H100", "metrics": 5, "workload": {
            "mode": "static_batch", "batch_size": 1, "input_len": 128, "output_len": 8}}]})},
        ("'metrics' must be an object",)),
    "F16-completed-half": (["calibrate", "bench.json"], {"bench.json": bench(completed=0.5)},
                           ("'completed' must be a whole number",)),
    "F16-pp-infinity": (["calibrate", "m.json"], {"m.json": _point().replace(
        '"ttft_ms": 12', '"ttft_ms": 12, "pipeline_parallel_size": Infinity')},
        ("'pipeline_parallel_size' must be a whole number",)),
    "F16-quantization-4": (["calibrate", "m.json"], {"m.json": _point(quantization=4)},
                           ("--quantization must be a name",)),
    "F16-csv-huge-prompt": (["calibrate", "m.csv"], {"m.csv": f"{HEAD}\n{L1B},H100,1,"
                            "99999999999999999999,64,12\n"}, ("m.csv:2", "--prompt")),
    "F16-csv-huge-pp": (["calibrate", "m.csv"], {"m.csv": f"{HEAD},pipeline_parallel_size\n"
                        f"{L1B},H100,1,512,64,12,99999999999999999999\n"},
                        ("m.csv:2", "--pipeline-parallel-size", "4,096")),
    "F16-csv-batch-2^63": (["calibrate", "m.csv"], {"m.csv": f"{HEAD}\n{L1B},H100,"
                           "9223372036854775000,512,64,12\n"}, ("m.csv:2", "--batch")),
    "F16-tp-400-zeros": (["calibrate", "m.csv", "-tp", "1" + "0" * 400], {"m.csv": MCSV},
                         ("--tensor-parallel-size",)),
    # F18: NaN, infinities and negatives from GPU and profile files
    "F18-bandwidth-nan": ([*LAT_GPU, "--json"], {"gpu.yaml": gpu_file(mem_bw_tbps=".nan")},
                          ("mem_bw_tbps",)),
    "F18-overhead-nan": ([*LAT, "--profile", "p.json", "--json"],
                         {"p.json": profile(default={"prefill_overhead_s": float("nan")},
                                            profiles=[])}, ("prefill_overhead_s", "[0, 10]")),
    "F18-compute-eff-tiny": ([*LAT, "--profile", "p.json", "--json"],
                             {"p.json": profile(default={"compute_eff": 1e-300}, profiles=[])},
                             ("compute_eff", "[0.01, 1]")),
    "F18-negative-link": ([*LAT_GPU, "-tp", "2", "--json"],
                          {"gpu.yaml": gpu_file(interconnect_gbps="-80")},
                          ("interconnect_gbps", "[0, 100000]")),
    "F18-negative-memory": (["capacity", L1B, "--gpu", "gpu.yaml"],
                            {"gpu.yaml": gpu_file(memory_gb="-80")}, ("memory_gb",)),
    "F18-tflops-zero-bf16-only": (LAT_GPU, {"gpu.yaml": gpu_file(bf16_tflops_dense="1e9")},
                                  ("bf16_tflops_dense", "100000")),
    # F19: would have printed numpy RuntimeWarnings
    "F19-time-scale": ([*TRACE, "--time-scale", "1e308"],
                       {"t.csv": "ts,in,out\n0,100,10\n10,200,20\n"}, ("--time-scale",)),
    "F19-tiny-bandwidth": (["simulate", L1B, "--gpu", "gpu.yaml", "--num-prompts", "5"],
                           {"gpu.yaml": gpu_file(mem_bw_tbps="1e-300")}, ("mem_bw_tbps",)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_clean_error(case: str, tmp_path: Path) -> None:
    args, files, fragments = CASES[case]
    assert_error(run_case(tmp_path, args, files), *fragments)


def test_f13_text_numbers_in_yaml_still_work(tmp_path: Path) -> None:
    """YAML reads 1e3 (no dot) as text; a plausible value written that way is accepted."""
    from tests.fuzz2_support import assert_ok

    out = assert_ok(run_case(tmp_path, LAT_GPU, {"gpu.yaml": gpu_file(bf16_tflops_dense="1e3")}))
    assert "TTFT" in out
