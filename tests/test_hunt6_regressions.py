"""Sixth hunt round (latency, quantization, disaggregation): each defect pinned by a
hand-checkable golden value."""

from __future__ import annotations

import pytest

from kvplan.costs.memory.params import param_counts, weight_bytes
from kvplan.specs.catalog import load_model
from tests.conftest import assert_one_line_error, run_cli

# -------------------- D1: --quantization against a checkpoint quantized otherwise
# vLLM's ModelConfig._verify_quantization refuses a --quantization that names another method
# than the checkpoint's quantization_config ("Quantization method specified in the model
# config (mxfp4) does not match the quantization method specified in the `quantization`
# argument (fp8)"); kvplan re-priced the checkpoint as if it were stored in the flag's format:
# gpt-oss-20b with -q fp8 had 20.58 GiB of fp8 weights (its MXFP4 experts as fp8) and a TPOT
# slower than the checkpoint's own (9.87 against 7.68 ms, H100, batch 8). And `-q none`, which
# vLLM reads as no flag (the checkpoint's own format), priced gpt-oss in bf16: `kvplan
# capacity` weights 38.97 GiB instead of 13.46 GiB (weight_bytes 12.82 GiB + MXFP4 padding).


@pytest.mark.parametrize(("model", "quant", "own"), [
    ("openai/gpt-oss-20b", "fp8", "mxfp4"),
    ("openai/gpt-oss-20b", "awq", "mxfp4"),
    ("deepseek-ai/DeepSeek-V3", "nvfp4", "fp8"),
])
def test_quantization_other_than_the_checkpoints_is_refused(model: str, quant: str,
                                                             own: str) -> None:
    r = run_cli("latency", model, "--gpu", "H200", "-tp", "8", "-q", quant, "--prompt", "100",
                "--output", "10")
    assert_one_line_error(r)
    assert f"--quantization {quant} does not match the checkpoint's own quantization" in r.err
    assert f"'{own}'" in r.err


@pytest.mark.parametrize("quant", ["mxfp4", "MXFP4", "none", None])
def test_quantization_naming_the_checkpoints_own_or_none_keeps_it(quant: str | None) -> None:
    """gpt-oss-20b: 24 layers x 32 experts x 3 x 2880 x 2880 expert weights in MXFP4 (half a
    byte each + one e8m0 scale byte per 32), everything else bf16 (2 bytes); the same figure
    as tests/test_params.py's, whether --quantization is absent, mxfp4 or none."""
    m = load_model("openai/gpt-oss-20b")
    experts_w = 24 * 32 * 3 * 2880 * 2880
    expected = (param_counts(m).total - experts_w) * 2 + experts_w // 2 + experts_w // 32
    assert weight_bytes(m, quantization=quant) == expected
    assert expected / 2**30 == pytest.approx(12.816, abs=0.001)  # bf16: 38.96


def test_quantization_equal_to_the_checkpoints_is_accepted() -> None:
    """Qwen3-8B-FP8 with -q fp8 (its own method) still answers; -q awq is refused (after the
    note naming the base config it was sized from)."""
    ok = run_cli("latency", "Qwen/Qwen3-8B-FP8", "--gpu", "H100", "-q", "fp8", "--prompt",
                 "100", "--output", "10", "--json")
    assert ok.code == 0, ok.err
    bad = run_cli("latency", "Qwen/Qwen3-8B-FP8", "--gpu", "H100", "-q", "awq", "--prompt",
                  "100", "--output", "10", "--json")
    assert bad.code == 2 and "Traceback" not in bad.err and bad.out == ""
    assert bad.err.strip().splitlines()[-1].startswith("error: --quantization awq does not match")


# -------------------- D2: latency --explain dropped without a word
# --plot without --sweep is refused ("--plot draws a sweep"), but --explain with --sweep was
# silently ignored (the sweep table and no op table), and --explain on a GPU without measured
# kernel tables (MI300X: the roofline prices the step whole) printed nothing for it: the flag
# asked for a table the answer neither showed nor said it could not show.
LAT = ("latency", "meta-llama/Llama-3.1-8B", "--prompt", "10", "--output", "2")


def test_explain_with_a_sweep_is_refused() -> None:
    r = run_cli(*LAT, "--gpu", "H100", "--explain", "--sweep", "batch=1,2")
    assert_one_line_error(r)
    assert "--explain lists one answer's ops, not a sweep's" in r.err


def test_explain_on_a_roofline_gpu_says_why_there_is_no_op_table() -> None:
    r = run_cli(*LAT, "--gpu", "MI300X", "--explain")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "--explain: no per-op table: MI300X has no measured kernel tables" in text
    plain = run_cli(*LAT, "--gpu", "MI300X")
    assert "--explain" not in plain.out  # only when asked
    measured = run_cli(*LAT, "--gpu", "H100", "--explain")
    assert "no per-op table" not in measured.out and "one decode step" in measured.out
