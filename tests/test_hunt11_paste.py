"""Hunt 11: a pasted ``vllm serve`` line read as vLLM 0.11.0's argparse reads it, and the
vLLM log lines ``kvplan capacity`` prints in vLLM's own format."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cli.pasted import parse_vllm_command
from kvplan.errors import InputError
from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize(("line", "message"), [
    # BooleanOptionalAction takes no value: argparse leaves "false" over -> "unrecognized
    # arguments: false". kvplan used to drop the word and read prefix caching as ON.
    (["--enable-prefix-caching", "false"], "refuses 'false': unrecognized argument"),
    (["--enforce-eager", "true"], "refuses 'true': unrecognized argument"),
    # one positional (model_tag, nargs='?', cli_args.make_arg_parser): a second is refused
    (["Qwen/Qwen3-8B"], "refuses 'Qwen/Qwen3-8B': unrecognized argument"),
    # "\ " (backslash, space) in a pasted multi-line command glues a space to the next word
    ([" --max-model-len", "4096"], "refuses ' --max-model-len': unrecognized argument"),
    # argparse: "ignored explicit argument 'false'"; kvplan used to set it off
    (["--enable-prefix-caching=false"], "ignored explicit argument 'false'"),
])
def test_words_vllm_refuses_are_refused(line: list[str], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_vllm_command(["vllm", "serve", M, *line])


def test_list_options_take_all_their_words_and_switches_none() -> None:
    """--cuda-graph-sizes / --served-model-name are nargs='+' (list fields in get_kwargs)."""
    found, ignored = parse_vllm_command(
        ["vllm", "serve", "--cuda-graph-sizes", "1", "2", "4", "--max-model-len", "4096", M,
         "--no-enable-prefix-caching", "--served-model-name", "a", "b"])
    assert found == {"model": M, "max_model_len": 4096, "enable_prefix_caching": False}
    assert ignored == ["--cuda-graph-sizes", "--served-model-name"]


def test_negative_value_is_a_value_as_in_argparse() -> None:
    """vLLM's parser has no option like a negative number, so "-tp -1" gives -tp the value -1
    (which is then out of range), not "-tp needs a value"."""
    r = run_cli("capacity", "--", "vllm", "serve", M, "-tp", "-1")
    assert_one_line_error(r)
    assert "--tensor-parallel-size must be a whole number in [1, 4,096], got -1" in r.err


def test_switch_then_value_is_one_clear_error_on_the_cli() -> None:
    r = run_cli("capacity", "--", "vllm", "serve", M, "--enable-prefix-caching", "false")
    assert_one_line_error(r)
    assert "--enable-prefix-caching is a switch and takes no value" in r.err


def test_config_yaml_is_read_as_vllm_inserts_it(tmp_path: Path) -> None:
    """vLLM's _pull_args_from_config: the file's options go after the MODEL and before the
    line's own, so -tp 4 on the line beats the file's 2; 'false' adds nothing (prefix caching
    stays vLLM's default, on). kvplan used to list --config as ignored and size TP 1 at the
    model's full 131,072 tokens."""
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("max_model_len: 4096\ntensor-parallel-size: 2\nenable-prefix-caching: false"
                   "\nenforce-eager: true\ncuda-graph-sizes: [1, 2]\n")
    found, ignored = parse_vllm_command(["vllm", "serve", M, "--config", str(cfg)])
    assert found == {"model": M, "max_model_len": 4096, "tensor_parallel_size": 2,
                     "enforce_eager": True}  # read: capacity's CUDA-graph line is 0
    assert ignored == ["--cuda-graph-sizes"]
    found, _ = parse_vllm_command(["vllm", "serve", M, "--config", str(cfg), "-tp", "4"])
    assert found["tensor_parallel_size"] == 4


@pytest.mark.parametrize(("tail", "message"), [
    (["--config", "missing.yaml"], "cannot read it (no such file or directory)"),
    (["--config", "serve.json"], "vLLM reads a .yaml or .yml file only"),
])
def test_config_file_vllm_cannot_read_is_one_error(tail: list[str], message: str) -> None:
    r = run_cli("capacity", "--", "vllm", "serve", M, *tail)
    assert_one_line_error(r)
    assert message in r.err


def test_config_after_options_needs_the_model_first_as_in_vllm(tmp_path: Path) -> None:
    """vllm serve -tp 2 MODEL --config f.yaml: 'No model specified!' (args[1] is an option)."""
    cfg = tmp_path / "serve.yaml"
    cfg.write_text("max-model-len: 4096\n")
    with pytest.raises(InputError, match="No model specified"):
        parse_vllm_command(["vllm", "serve", "-tp", "2", M, "--config", str(cfg)])
    cfg.write_text(f"model: {M}\n")  # the file's model: accepted
    assert parse_vllm_command(["vllm", "serve", "-tp", "2", "--config", str(cfg)])[0] == {
        "model": M, "tensor_parallel_size": 2}


@pytest.mark.parametrize("flags", [
    # (--num-gpu-blocks-override is modelled: test_hunt15_capacity2.py)
    ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}', M],
    # vLLM's ParallelConfig: EPLB needs expert parallelism and TP x DP > 1
    ["--enable-eplb", "--num-redundant-experts", "32", "Qwen/Qwen3-30B-A3B", "-tp", "2",
     "--enable-expert-parallel"],
])
def test_flags_that_change_kv_memory_warn_when_ignored(flags: list[str]) -> None:
    """Each changes vLLM's KV memory (a connector's buffers; redundant experts take memory):
    a warning, not the harmless-flags note. (--disable-hybrid-kv-cache-manager is modelled:
    test_hunt14_hybrid.py.)"""
    r = run_cli("capacity", "--max-model-len", "4096", "--", "vllm", "serve", *flags)
    assert r.code == 0, r.err
    assert f"warning: {flags[0]} ignored:" in r.err
    assert "note: ignored vLLM flags" not in r.out


def test_available_kv_memory_line_is_in_gib_as_vllm_prints_it() -> None:
    """vLLM 0.11 gpu_worker.py: logger.info("Available KV cache memory: %.2f GiB", ...), GiB
    whatever the size: 512 MiB given is 512 / 1024 = 0.50 GiB (kvplan printed '512.00 MiB')."""
    r = run_cli("capacity", "Qwen/Qwen3-8B", "--kv-cache-memory", "512MiB",
                "--max-model-len", "1024")
    assert r.code == 0, r.err
    assert "Available KV cache memory: 0.50 GiB (given by --kv-cache-memory)\n" in r.out


@pytest.mark.parametrize(("flag", "value"), [
    ("--kv-cache-dtype", "nvfp4"),  # CacheDType (0.11): auto bfloat16 fp8 fp8_e4m3 fp8_e5m2 fp8_inc
    ("--kv-cache-dtype", "FP8"),  # argparse choices are case-sensitive
    ("--dtype", "bf16"),  # ModelDType: auto half float16 bfloat16 float float32
    ("--block-size", "256"),  # BlockSize (0.11): 1 8 16 32 64 128 (256 came later)
    ("-q", "none"),  # QuantizationMethods has no 'none'
])
def test_values_outside_vllm_choices_are_refused_in_a_pasted_line(flag: str, value: str) -> None:
    """vLLM 0.11's get_kwargs makes a Literal field an argparse choices list: 'invalid
    choice'. kvplan used to size these lines (e.g. --kv-cache-dtype nvfp4: 1,496,288 tokens)."""
    with pytest.raises(InputError, match=f"refuses {flag} {value}: invalid choice"):
        parse_vllm_command(["vllm", "serve", M, flag, value])


def test_values_inside_vllm_choices_still_read() -> None:
    found, _ = parse_vllm_command(["vllm", "serve", M, "--kv-cache-dtype", "fp8_inc",
                                   "--dtype", "half", "--block-size", "016", "-q", "fp8"])
    assert found == {"model": M, "kv_cache_dtype": "fp8_inc", "dtype": "half",
                     "block_size": 16, "quantization": "fp8"}


@pytest.mark.parametrize(("flag", "value"), [
    ("--kv-cache-memory-bytes", "24GiB"),  # no fullmatch of (\d+(\.\d+)?)([kKmMgGtT]); int() fails
    ("--kv-cache-memory-bytes", "1.5G"),  # "Decimals are not allowed with binary suffixes"
    ("--max-model-len", "8.5K"),
    ("--max-num-batched-tokens", "1t"),  # t/T match the pattern but have no multiplier
])
def test_values_vllm_human_readable_int_refuses_are_refused(flag: str, value: str) -> None:
    """vLLM 0.11 engine/arg_utils.py human_readable_int; kvplan's own flags (before --) keep
    the wider syntax (24GiB, 1.5G = 1.5 x 2**30)."""
    with pytest.raises(InputError, match=f"refuses {flag} {value}: invalid human_readable_int"):
        parse_vllm_command(["vllm", "serve", M, flag, value])


def test_human_readable_ints_vllm_reads_still_read() -> None:
    """8.5k = 8,500; 16K = 16 x 1024 = 16,384; 24G = 24 x 2**30 = 25,769,803,776 B."""
    found, _ = parse_vllm_command(["vllm", "serve", M, "--max-model-len", "8.5k",
                                   "--max-num-batched-tokens", "16K",
                                   "--kv-cache-memory-bytes", "24G"])
    assert found == {"model": M, "max_model_len": 8500, "max_num_batched_tokens": 16_384,
                     "kv_cache_memory_bytes": 25_769_803_776}
