"""Copy-paste safety: serve/bench lines name the model as given and the block vLLM will use; a
pasted `vllm serve` line is read with vLLM 0.11.0's own option table (typos refused)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kvplan.cli.pasted import IGNORED_EFFECTS, parse_vllm_command
from kvplan.cli.vllm_options import serve_options, vllm_option
from kvplan.costs.memory.settings import mla_block_log, mla_block_size
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model, served_name
from kvplan.specs.hardware import load_gpu
from tests.conftest import assert_one_line_error, run_cli

ROOT = Path(__file__).resolve().parent.parent
PLAN = ("--gpu", "H100", "-tp", "1", "--num-prompts", "150", "--random-input-len", "500",
        "--random-output-len", "60", "--request-rate", "4", "--sample-requests", "60",
        "--workers", "1", "--max-num-batched-tokens", "default",
        "--slo", "ttft:p99:2000", "tpot:p99:100", "--json")


def test_serve_and_bench_lines_keep_the_instruct_id() -> None:
    r = run_cli("plan", "meta-llama/Llama-3.1-8B-Instruct", *PLAN)
    assert r.code == 0, r.err
    s = r.json()["summary"]
    assert s["vllm_serve"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --")
    assert "--model meta-llama/Llama-3.1-8B-Instruct --" in s["vllm_bench_serve"]
    assert "using the config of meta-llama/Llama-3.1-8B" in r.err  # sized from the base


def test_served_name_is_as_typed_or_the_config_folder(tmp_path: Path) -> None:
    assert served_name(" meta-llama/Llama-3.1-8B-Instruct ") == "meta-llama/Llama-3.1-8B-Instruct"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    assert served_name(str(tmp_path / "m" / "config.json")) == str(tmp_path / "m")
    assert served_name(str(tmp_path / "m")) == str(tmp_path / "m")


def test_typo_flag_refused_with_the_nearest_option() -> None:
    r = run_cli("capacity", "--gpu", "H100", "--", "vllm", "serve", "meta-llama/Llama-3.1-8B",
                "--max-model-lenn", "4096")
    assert_one_line_error(r)
    assert r.err.strip() == ("error: vllm serve refuses --max-model-lenn: unrecognized argument "
                             "(vLLM 0.11.0); did you mean --max-model-len?")


def test_unambiguous_prefix_is_the_option_as_in_argparse() -> None:
    """FlexibleArgumentParser keeps argparse's allow_abbrev=True (vllm/utils/__init__.py)."""
    found, _ = parse_vllm_command(["vllm", "serve", "m", "--max-model", "4096",
                                   "--gpu_memory_util=0.8"])
    assert found == {"model": "m", "max_model_len": 4096, "gpu_memory_utilization": 0.8}
    with pytest.raises(InputError) as err:
        vllm_option("--max-num")
    assert str(err.value) == (
        "vllm serve refuses --max-num: ambiguous option (vLLM 0.11.0: could match "
        "--max-num-batched-tokens, --max-num-partial-prefills, --max-num-seqs); write the "
        "option in full")


def test_serve_with_model_option_refused_as_vllm_does() -> None:
    with pytest.raises(InputError, match="you should provide the model as a positional"):
        parse_vllm_command(["vllm", "serve", "--model", "m"])
    found, _ = parse_vllm_command(["python", "-m", "vllm.entrypoints.openai.api_server",
                                   "--model", "m"])
    assert found == {"model": "m"}


def test_known_unmodelled_flags_keep_their_warning_and_are_vllm_options() -> None:
    assert set(IGNORED_EFFECTS) <= set(serve_options().takes_value)
    found, ignored = parse_vllm_command(["vllm", "serve", "m", "-O3", "--port", "8000",
                                         "--compilation-config.level", "3", "--swap-space",
                                         "4", "--max-num-seqs", "8"])
    assert ignored == ["-O", "--port", "--compilation-config", "--swap-space"]
    assert found == {"model": "m", "max_num_seqs": 8}  # -O3 carried its own value


def test_option_table_names_its_vllm_version_and_switches() -> None:
    t = serve_options()
    assert t.vllm_version == "0.11.0"
    assert t.takes_value["--max-model-len"] and t.takes_value["-tp"]
    assert not t.takes_value["--enforce-eager"] and not t.takes_value["--no-enforce-eager"]
    assert not t.takes_value["--no-enable-chunked-prefill"]  # SkipValidation[bool] field
    assert "--num-speculative-tokens" not in t.takes_value  # gone in 0.11 (speculative-config)


def _derive_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "derive_vllm_serve_flags", ROOT / "scripts" / "derive_vllm_serve_flags.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_derive_script_reads_a_parser_the_way_vllm_builds_it(tmp_path: Path) -> None:
    """A two-file stand-in for vLLM's sources: every rule the script applies, checked by hand."""
    (tmp_path / "vllm" / "config").mkdir(parents=True)
    (tmp_path / "vllm" / "engine").mkdir()
    (tmp_path / "vllm" / "entrypoints" / "openai").mkdir(parents=True)
    (tmp_path / "vllm" / "_version.py").write_text("__version__ = version = '9.9.9'\n")
    (tmp_path / "vllm" / "config" / "cache.py").write_text(
        "class CacheConfig:\n    block_size: int = 16\n    enable_x: Optional[bool] = None\n")
    (tmp_path / "vllm" / "entrypoints" / "openai" / "cli_args.py").write_text(
        "class FrontendArgs:\n    port: int = 8000\n    allow_y: bool = False\n"
        "def make_arg_parser(parser):\n"
        "    parser.add_argument('--headless', action='store_true')\n")
    (tmp_path / "vllm" / "engine" / "arg_utils.py").write_text(
        "def add_cli_args(parser):\n    kw = get_kwargs(CacheConfig)\n"
        "    g.add_argument('--block-size', '-bs', **kw['block_size'])\n"
        "    g.add_argument('--enable-x', **kw['enable_x'])\n"
        "    for arg, type in [('--old', str)]:\n        g.add_argument(arg, type=type)\n")
    doc = _derive_module().main(tmp_path)
    assert doc["vllm_version"] == "9.9.9"
    assert {k: v["takes_value"] for k, v in doc["flags"].items()} == {
        "-h": False, "--help": False, "--headless": False, "--port": True,
        "--allow-y": False, "--no-allow-y": False, "--block-size": True, "-bs": True,
        "--enable-x": False, "--no-enable-x": False, "--old": True}


def test_bundled_table_is_the_scripts_output_shape() -> None:
    doc = json.loads((ROOT / "src/kvplan/data/vllm/serve_flags.json").read_text())
    assert doc["made_by"].startswith("scripts/derive_vllm_serve_flags.py")
    assert doc["allow_abbrev"] is True and len(doc["flags"]) == 243


@pytest.mark.parametrize(("gpu", "block", "forced", "line"), [
    ("H100", 16, 64, "Forcing kv cache block size to 64 for FlashMLA backend."),
    ("H200", 128, 64, "Forcing kv cache block size to 64 for FlashMLA backend."),  # != 64
    ("B200", 64, 128, "Forcing kv cache block size to 128 for CUTLASS_MLA backend."),
    ("A100-80GB", 16, 16, ""),  # Triton MLA: no block constraint
])
def test_mla_block_size_as_vllm_forces_and_logs_it(gpu: str, block: int, forced: int,
                                                   line: str) -> None:
    """vllm/platforms/cuda.py (0.11.0) check_and_update_config: FlashMLA on Hopper when
    block != 64, CUTLASS MLA on SM100 when block != 128; other GPUs keep --block-size."""
    model, hw = load_model("deepseek-ai/DeepSeek-V2-Lite"), load_gpu(gpu)
    assert mla_block_size(model, hw, block) == forced
    assert mla_block_log(model, hw, block) == line
    assert mla_block_log(load_model("meta-llama/Llama-3.1-8B"), hw, 16) == ""


def test_capacity_prints_vllms_line_and_plan_serves_the_forced_block() -> None:
    r = run_cli("capacity", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100", "--block-size", "16")
    assert r.code == 0, r.err
    assert "block 64 tokens" in r.out
    assert "Forcing kv cache block size to 64 for FlashMLA backend." in r.out
    p = run_cli("plan", "deepseek-ai/DeepSeek-V2-Lite", *PLAN)
    assert p.code == 0, p.err
    assert " --block-size 64 " in p.json()["summary"]["vllm_serve"]


def test_plan_searches_the_block_vllm_uses_so_forced_blocks_are_one_candidate() -> None:
    p = run_cli("plan", "deepseek-ai/DeepSeek-V2-Lite", *PLAN, "--block-size", "16,64", "-dp", "1")
    assert p.code == 0, p.err
    cands = p.json()["candidates"]
    assert [(c["stage"], c["block_size"]) for c in cands] == [("verified", 64), ("duplicate", 64)]
    assert cands[1]["reason"].startswith("the same engine flags as c0000 once vLLM's defaults")
