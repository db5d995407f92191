"""The vLLM engine flags are declared once (cli/flags.py) and read the same way everywhere."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kvplan.cli
from kvplan.cli.flags import BY_NAME, engine_settings, human_readable_int, settings_grid
from kvplan.cli.pasted import parse_vllm_command
from kvplan.errors import InputError
from tests.conftest import assert_one_line_error, run_cli

CLI = Path(kvplan.cli.__file__).parent


@pytest.mark.parametrize(
    ("text", "value"),
    [("8192", 8192), ("8k", 8000), ("8K", 8192), ("32K", 32768), ("25.6k", 25600),
     ("1m", 1_000_000), ("1M", 1_048_576), (" 2g ", 2_000_000_000)],
)
def test_human_readable_int_is_vllms(text: str, value: int) -> None:
    # vLLM 0.11 vllm/engine/arg_utils.py human_readable_int: lowercase = 10^3n, uppercase = 2^10n
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["1.5K", "8kk", "", "-8", "eight", "1e3"])
def test_human_readable_int_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        human_readable_int(text)


def test_max_model_len_accepts_8k_everywhere() -> None:
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--max-model-len=8k", "--json")
    assert r.code == 0, r.err
    assert r.json()["max_model_len"] == 8000
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--max-model-len", "32K", "--json")
    assert r.json()["max_model_len"] == 32768
    assert_one_line_error(run_cli("capacity", "meta-llama/Llama-3.1-8B", "--max-model-len", "8x"))


def test_engine_settings_keeps_only_given_engine_fields() -> None:
    got = engine_settings({"tensor_parallel_size": 2, "max_model_len": "4k", "batch": 3,
                           "dtype": None, "kv_cache_memory_bytes": "1GiB"})
    assert got == {"tensor_parallel_size": 2, "max_model_len": 4000,
                   "kv_cache_memory_bytes": 2**30}


def test_settings_grid_is_the_product() -> None:
    grid = list(settings_grid({"tensor_parallel_size": ["1", "2"], "kv_cache_dtype": ["auto",
                                                                                    "fp8"]}))
    assert len(grid) == 4 and grid[0] == {"tensor_parallel_size": 1, "kv_cache_dtype": "auto"}
    with pytest.raises(InputError, match="--tensor-parallel-size expects a whole number"):
        list(settings_grid({"tensor_parallel_size": ["two"]}))


def test_pasted_line_reads_booleans_and_short_forms() -> None:
    found, ignored = parse_vllm_command(
        ["vllm", "serve", "m", "--no-enable-prefix-caching", "--enable-chunked-prefill",
         "-tp", "4", "--max-model-len", "16k", "--port", "8000"])
    assert found == {"model": "m", "enable_prefix_caching": False,
                     "enable_chunked_prefill": True, "tensor_parallel_size": 4,
                     "max_model_len": 16000}
    assert ignored == ["--port"]
    assert BY_NAME["-pp"].field == "pipeline_parallel_size"


@pytest.mark.parametrize(
    "args",
    [
        ("kv", "meta-llama/Llama-3.1-8B", "-tp", "3"),
        ("request", "meta-llama/Llama-3.1-8B", "--prompt", "10", "--output", "5", "-tp", "3"),
        ("batch", "meta-llama/Llama-3.1-8B", "--batch", "2", "--context", "10", "-tp", "3"),
        ("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "10",
         "--output", "5", "-tp", "3"),
        ("capacity", "meta-llama/Llama-3.1-8B", "-tp", "3"),
        ("simulate", "meta-llama/Llama-3.1-8B", "-tp", "3", "--num-prompts", "2"),
    ],
)
def test_every_command_applies_vllms_tp_rule(args: tuple[str, ...]) -> None:
    r = run_cli(*args)
    assert_one_line_error(r)
    assert "--tensor-parallel-size 3 must divide num_attention_heads 32" in r.err


def test_levers_leave_out_tp_degrees_vllm_refuses() -> None:
    # Qwen2.5-7B: 28 attention heads, 4 KV heads -> TP 8 does not divide 28
    r = run_cli("levers", "Qwen/Qwen2.5-7B", "--batch", "1", "--context", "16", "--json")
    assert r.code == 0, r.err
    tps = {row["tensor_parallel_size"] for row in r.json()["levers"]}
    assert tps == {1, 2, 4}


def test_cli_functions_and_files_are_short() -> None:
    long = []
    for path in CLI.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 400, path.name
        for node in ast.walk(ast.parse(text)):
            lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.FunctionDef) and lines > 50:
                long.append(f"{path.name}:{node.name}")
    assert long == []


def test_pasted_line_warns_once_per_flag_kvplan_ignores() -> None:
    r = run_cli("capacity", "--gpu", "H100", "--", "vllm", "serve", "--enforce-eager",
                "meta-llama/Llama-3.1-8B", "--max-model-len", "8k", "--data-parallel-size", "2",
                "--enable-expert-parallel", "--cpu-offload-gb", "4", "--speculative-config",
                '{"method": "ngram", "num_speculative_tokens": 3}', "--port", "8000")
    assert r.code == 0, r.err
    warnings = [line for line in r.err.splitlines() if line.startswith("warning: ")]
    # issue 18: -dp and --enable-expert-parallel are modelled now; EP on a dense model warns
    # that it has no effect (vLLM ignores it there); --enforce-eager is read (no graph memory)
    assert [w.split()[1] for w in warnings] == [
        "--cpu-offload-gb", "--speculative-config",
        "--enable-expert-parallel"]
    assert "no effect on meta-llama/Llama-3.1-8B, a dense model" in r.err
    assert "2 DP ranks x 1 GPUs" in r.out
    assert "Maximum concurrency for 8,000 tokens" in r.out  # MODEL after a switch is the model
    assert "note: ignored vLLM flags: --port" in r.out
