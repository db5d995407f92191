"""Issue 16 (thin GPU cells): TensorRT-LLM perf-overview's NVFP4 offline max-throughput rows on
B200 and GB200 (Llama-3.3-70B TP1, Llama-3.1-405B TP4), held out like the 60 FP8 H100 / H200
rows, and the offline report prices each row at its own precision."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from tests.test_compare_disagg_public import _load

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "src" / "kvplan" / "data" / "measurements"
COMMIT = "00f37686aa854010d68bcbd0f4ab000221541ca6"
PAGE = f"https://github.com/NVIDIA/TensorRT-LLM/blob/{COMMIT}/docs/source/performance/perf-overview.md"


def _offline() -> list[dict]:
    pts = json.loads((MEASUREMENTS / "latency_calibration.json").read_text("utf-8"))["points"]
    return [p for p in pts if p["workload"]["mode"].startswith("offline_max_throughput")]


def _report() -> ModuleType:
    return _load("offline_throughput_report")


def test_fp4_rows_are_every_row_of_the_b200_gb200_columns_each_cited_by_line() -> None:
    """10 ISL/OSL rows x (B200, GB200) x (70B TP1, 405B TP4) = 40 rows, ids -61 to -100; the
    page's 'Llama 3.3 70B' table rows are lines 92-101, 'Llama 3.1 405B' lines 206-215."""
    rows = _offline()
    assert len(rows) == 100 and len({p["id"] for p in rows}) == 100
    fp4 = [p for p in rows if p["precision"] == "FP4"]
    assert [p["id"] for p in fp4] == [f"trtllm-perfoverview-{i}" for i in range(61, 101)]
    cells = {(p["gpu"], p["model_config"], p["tp"]) for p in fp4}
    assert cells == {(g, m, tp) for g in ("B200-SXM-180GB", "GB200")
                     for m, tp in (("meta-llama--Llama-3.1-70B", 1),
                                   ("meta-llama--Llama-3.1-405B", 4))}
    lines = sorted({int(p["source"]["url"].rsplit("#L", 1)[1]) for p in fp4})
    assert lines == [*range(92, 102), *range(206, 216)]
    assert all(p["source"]["url"].startswith(PAGE + "#L") for p in fp4)
    by_id = {p["id"]: p for p in fp4}
    # the 70B table's 1000/1000 row (line 96): '| 1000/1000 | 7,007 | 7,326 | 2,909 | 4,205 |',
    # B200 TP1 (FP4) and GB200 TP1 (FP4) columns; the page ran 3000 requests at 1000/1000
    b200, gb200 = by_id["trtllm-perfoverview-65"], by_id["trtllm-perfoverview-75"]
    for p, value in ((b200, 7007), (gb200, 7326)):
        assert p["metrics"]["output_throughput"] == value
        assert p["source"]["url"].endswith("#L96")
        assert (p["workload"]["input_len"], p["workload"]["output_len"],
                p["workload"]["num_requests"]) == (1000, 1000, 3000)


def test_the_offline_report_prices_a_row_at_its_precision() -> None:
    """Before: every row ran as --quantization fp8 under the GPU's fp8 profile; an NVFP4 row
    is vLLM's modelopt_fp4 under the fp4 profile, and each such deployment fits the memory plan."""
    from kvplan.costs.memory.plan import plan_memory
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    report = _report()
    assert report.QUANT == {"FP8": ("fp8", "fp8"), "FP4": ("modelopt_fp4", "fp4")}
    assert {p["precision"] for p in _offline()} == set(report.QUANT)
    for gpu, model, tp in {(p["gpu"], p["model_config"], p["tp"]) for p in _offline()
                           if p["precision"] == "FP4"}:
        engine = EngineConfig(tensor_parallel_size=tp, quantization="modelopt_fp4",
                              kv_cache_dtype="fp8", gpu_memory_utilization=0.95)
        plan = plan_memory(load_model(model.replace("--", "/")), load_gpu(gpu), engine)
        assert plan.num_blocks > 0, (gpu, model, tp)
