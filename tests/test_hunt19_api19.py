"""Session 19, api19: kvplan used from Python (notebooks) against the CLI's answers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.errors import ArgumentTypeError
from kvplan.specs.catalog import config_path
from tests.conftest import run_cli


@pytest.mark.parametrize(("model", "tp"), [("meta-llama/Llama-3.1-8B", 3),
                                           ("meta-llama/Llama-3.1-8B", 64),
                                           ("tiiuae/falcon-7b", 3)])
def test_kv_spec_refuses_a_tp_vllm_refuses_as_kvplan_kv_does(model: str, tp: int) -> None:
    # Llama-3.1-8B: 32 attention heads, 8 KV heads; TP 3 divides neither, so vLLM refuses it
    # (and so does `kvplan kv -tp 3`). kvplan.kv_spec answered 32,768 B/token: 2 x 32 layers
    # x (8 // 3 = 2) heads x 128 x 2 B, though one of three GPUs would hold 3 KV heads.
    cli = run_cli("kv", model, "-tp", str(tp))
    assert cli.code == 2
    with pytest.raises(kvplan.InputError) as err:
        kvplan.kv_spec(kvplan.load_model(model), tensor_parallel_size=tp)
    assert cli.err.strip() == f"error: {err.value}"


def test_paths_are_taken_as_pathlib_paths_or_strings(tmp_path: Path) -> None:
    # README: load_model takes "a path to a config.json"; a notebook's path is a pathlib.Path.
    # kvplan refused one ("argument 'name_or_path' must be str, got PosixPath"), and
    # PlanOptions.prices_file refused the str every other path argument takes.
    src = config_path("meta-llama/Llama-3.1-8B")
    assert src is not None
    cfg = tmp_path / "llama" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(src.read_text())
    by_path, by_str = kvplan.load_model(cfg), kvplan.load_model(str(cfg))
    assert by_path == by_str and by_path.name == "llama"  # a folder's config.json: its folder
    gpu_file = tmp_path / "gpu.json"
    gpu_file.write_text(json.dumps({"id": "X1", "memory_gb": 80, "mem_bw_tbps": 3.35,
                                    "bf16_tflops_dense": 989}))
    assert kvplan.load_gpu(gpu_file) == kvplan.load_gpu(str(gpu_file))
    work = kvplan.WorkloadArgs(num_prompts=20)
    a = kvplan.simulate_serving(cfg, gpu_file, workload=work)
    b = kvplan.simulate_serving(str(cfg), str(gpu_file), workload=work)
    assert kvplan.compute_metrics(a.result) == kvplan.compute_metrics(b.result)
    with pytest.raises(kvplan.ConfigError, match=r"none\.json: cannot read the profile"):
        kvplan.simulate_serving(cfg, "H100", workload=work, profile=tmp_path / "none.json")
    slo = kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:2000"]))
    for prices in (tmp_path / "none.csv", str(tmp_path / "none.csv")):
        with pytest.raises(kvplan.InputError, match=r"none\.csv: cannot read it"):
            kvplan.plan(cfg, work, slo, gpus=["H100"], prices_file=prices)
    with pytest.raises(kvplan.ConfigError, match=r"none\.json: cannot read the profile"):
        kvplan.plan(cfg, work, slo, gpus=["H100"], profile=tmp_path / "none.json")


@pytest.mark.parametrize(("make", "said"), [
    (lambda: kvplan.EngineConfig(tensor_parallel=2),
     "kvplan.EngineConfig(): got an unexpected keyword argument 'tensor_parallel' "
     "(did you mean 'tensor_parallel_size'?)"),
    (lambda: kvplan.RequestShape(batch=1),
     "kvplan.RequestShape(): missing 2 required keyword-only arguments: 'prompt_tokens' "
     "and 'output_tokens'"),
    (lambda: kvplan.Slo(bound=()),
     "kvplan.Slo(): got an unexpected keyword argument 'bound' (did you mean 'bounds'?)"),
    (lambda: kvplan.Deployment(model=kvplan.load_model("meta-llama/Llama-3.2-1B")),
     "kvplan.Deployment(): missing 2 required keyword-only arguments: 'gpu' and 'engine'"),
    (lambda: kvplan.Profile(gpu="H100", compute_efficiency=0.6),
     "kvplan.Profile(): got an unexpected keyword argument 'compute_efficiency' (did you "
     "mean 'compute_eff'?)"),
    (lambda: kvplan.PlanOptions(gpu=("H100",)),
     "kvplan.PlanOptions(): got an unexpected keyword argument 'gpu' (did you mean 'gpus'?)"),
])
def test_an_unknown_or_missing_field_is_a_kvplan_error_naming_it(make: Any, said: str) -> None:
    # README: "a missing, unknown or extra argument" is one ArgumentTypeError (a KvplanError),
    # as WorkloadArgs(foo=1) and kvplan.kv_spec(kv_dtype=...) are; EngineConfig(foo=1)
    # raised Python's bare TypeError, which `except kvplan.KvplanError` let through.
    with pytest.raises(ArgumentTypeError) as err:
        make()
    assert str(err.value) == said


def test_notebook_kv_shows_the_pages_in_the_block_vllm_runs_as_kvplan_kv_does() -> None:
    # Qwen3-Next at TP2, fp8: one state page is 36 layers' 548,864 B -> per layer page of
    # 12,288 x 2 + 262,144 x 2 = 548,864 B = 536 KiB; an attention page per token is
    # 2 x 1 KV head x 256 x 1 B = 512 B, so vLLM raises the block to 536 KiB / 512 B = 1,072
    # tokens (kvplan kv: "block 1072", page 536.00 KiB on both rows). The notebook view of
    # kv_spec's answer showed the attention page at block 16 (8.00 KiB).
    from kvplan.report.views.notebook import html

    kv = kvplan.kv_spec(kvplan.load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"), "fp8", 2)
    text = re.sub(r"<[^>]+>", "", html(kv))
    cli = json.loads(run_cli("kv", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--kv-cache-dtype",
                             "fp8", "-tp", "2", "--json").out)
    assert cli["block_size"] == 1072 and "block 1072" in text
    assert [g["page_size_bytes"] for g in cli["groups"]] == [548_864, 548_864]
    assert "8.00 KiB" not in text and text.count("536.00 KiB") == 2
