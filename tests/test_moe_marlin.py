"""gpt-oss's MXFP4 experts on Hopper under vLLM before 0.12: Marlin, not the Triton kernel the
0.24 tables measured (``kvplan.specs.vllm_releases``), priced from H100's measured Marlin MXFP4
rows (Kimi-K3's shape) scaled to gpt-oss's by the nearest-shape rule."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from kvplan.cli.pasted import parse_vllm_command
from kvplan.costs import kernels as kn
from kvplan.costs.kernels.tables import require
from kvplan.costs.step.ops import stage_ops
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment, vllm_serve_env
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from kvplan.specs.vllm_releases import mxfp4_moe_backend, release
from tests.conftest import assert_one_line_error, run_cli

moe_mod = importlib.import_module("kvplan.costs.kernels.moe")
H100 = "H100-SXM-80GB"
GPT_OSS_20B = {"hidden": 2880, "inter": 2880, "num_experts": 32, "topk": 4}
KIMI_K3 = {"hidden": 3584, "inter": 3072, "num_experts": 896, "topk": 16}
MARLIN = "w4a16_mxfp4_marlin"


@pytest.mark.parametrize(("engine", "version", "gpu", "want"), [
    ("vLLM", "v0.11.0", H100, "marlin"),
    ("vLLM", "v0.10.2", "H200-SXM-141GB", "marlin"),
    ("vLLM", "v0.12.0", H100, "auto"),   # triton_kernels shipped (vLLM PR #28788)
    ("vLLM", "v0.15.1 (server.log banner)", "H200-SXM-141GB", "auto"),
    ("vLLM", "v0.11.0", "A100-80GB-SXM", "auto"),   # Ampere always ran Marlin: its own rule
    ("vLLM", "v0.11.0", "H800-SXM-80GB", "marlin"),   # Hopper by its catalog arch
    ("vLLM", "v0.11.0", "B200-SXM-180GB", "auto"),
    ("vLLM", "v0.11.0", "my-own-gpu", "auto"),   # not in the catalog: no arch to read
    ("SGLang", "v0.5.4", H100, "auto"),
    ("vLLM", "main at the PR's base (Aug 2025; not printed)", H100, "auto"),
])
def test_release_rule(engine: str, version: str, gpu: str, want: str) -> None:
    assert mxfp4_moe_backend(engine, version, gpu) == want


def test_release_parses_printed_versions() -> None:
    assert release("v0.11.0") == (0, 11)
    assert release("0.10.2 (image vllm/vllm-openai:v0.10.2)") == (0, 10)
    assert release("main") is None and release(None) is None


def test_marlin_is_the_expert_kernel_only_for_mxfp4_experts() -> None:
    marlin = EngineConfig(mxfp4_moe_backend="marlin")
    ops = stage_ops(load_model("openai/gpt-oss-20b"), marlin)
    assert ops.moe is not None and ops.moe.dtype == MARLIN
    auto = stage_ops(load_model("openai/gpt-oss-20b"), EngineConfig())
    assert auto.moe is not None and auto.moe.dtype == "w4a16_mxfp4"
    mixtral = stage_ops(load_model("mistralai/Mixtral-8x7B-v0.1"), marlin)
    assert mixtral.moe is not None and mixtral.moe.dtype is None


def test_measured_marlin_row_is_read_back() -> None:
    """aiconfigurator-core 0.12.0, h100_sxm/moe/vllm/0.24.0/moe_perf.parquet, Kimi-K3's
    w4a16_mxfp4 Marlin rows (tp 1, ep 1, balanced): 16,384 tokens take 75.413 ms."""
    t = kn.moe_s(H100, np.array([16384]), dtype=MARLIN, **KIMI_K3)
    assert t[0] == pytest.approx(75.413e-3, rel=1e-3)


def test_gpt_oss_marlin_is_kimi_scaled_by_hand() -> None:
    """Local weights: 32 x 2880 x 2880 over 896 x 3584 x 3072 = 265,420,800 / 9,865,003,008
    = 0.026905; tokens per expert 4/32 against 16/896: Kimi's token count is 7x gpt-oss's."""
    scale = 32 * 2880 * 2880 / (896 * 3584 * 3072)
    assert scale == pytest.approx(0.026905, rel=1e-4)
    t = np.array([64.0, 1024.0, 2048.0])
    gpt = kn.moe(H100, t, dtype=MARLIN, **GPT_OSS_20B)
    kimi = kn.moe_s(H100, 7 * t, dtype=MARLIN, **KIMI_K3)
    assert np.allclose(gpt.seconds, np.maximum(kimi * scale, gpt.seconds), rtol=1e-9)
    assert np.allclose(gpt.seconds[1:], kimi[1:] * scale, rtol=1e-6)
    assert "scaled from (hidden 3584, inter 3072, top-16 of 896, tp 1, ep 1)" in gpt.notes[0]


def test_marlin_prefill_slower_decode_faster_than_triton() -> None:
    """Marlin runs Ampere-style mma (no wgmma): H100's measured Marlin rows top out near 230
    TFLOP/s where the Triton MXFP4 rows reach 560, so a prefill chunk is 2-3x slower; one
    decode token reads 4 experts' 4.25-bit weights, where the measured Triton row takes 61 us
    (vLLM PR #27523 measured Marlin faster than Triton at concurrency 16)."""
    t = np.array([1.0, 8192.0])
    marlin = kn.moe_s(H100, t, dtype=MARLIN, **GPT_OSS_20B)
    triton = kn.moe_s(H100, t, dtype="w4a16_mxfp4", **GPT_OSS_20B)
    assert marlin[0] < 0.5 * triton[0]
    assert 2.0 < marlin[1] / triton[1] < 3.0


def test_marlin_never_faster_on_h100_than_h200() -> None:
    t = np.array([1, 16, 256, 4096, 16384])
    h200 = kn.moe_s("H200-SXM-141GB", t, dtype=MARLIN, **GPT_OSS_20B)
    assert (h200 <= kn.moe_s(H100, t, dtype=MARLIN, **GPT_OSS_20B) * (1 + 1e-9)).all()


def test_gpu_without_marlin_rows_prices_its_default_kernel_and_says_so() -> None:
    t = np.array([1, 1024])
    got = kn.moe("A100-80GB-SXM", t, dtype=MARLIN, **GPT_OSS_20B)
    default = kn.moe_s("A100-80GB-SXM", t, dtype="w4a16_mxfp4", **GPT_OSS_20B)
    assert np.array_equal(got.seconds, default)
    assert any("Marlin MXFP4 MoE not measured on A100-80GB-SXM" in n for n in got.notes)


def test_no_ep_deployment_reads_no_ep_slice() -> None:
    """DeepSeek-V2-Lite's bf16 experts (hidden 2048, 64 experts) on H100 at TP 1: the nearest
    measured shape is read at EP 1 (an EP slice permutes every token: other work)."""
    table = require(H100, "moe")
    want = moe_mod.MoeShape(2048, 1408, 6, 64, 1, 1)
    _, ref = moe_mod._nearest(table, "bfloat16", want)
    assert ref.ep == 1


def test_serve_env_and_pasted_line_round_trip() -> None:
    d = Deployment(model=load_model("openai/gpt-oss-20b"), gpu=load_gpu("H100"),
                   engine=EngineConfig(mxfp4_moe_backend="marlin"))
    assert vllm_serve_env(d) == ["VLLM_MXFP4_USE_MARLIN=1"]
    found, _ = parse_vllm_command(["VLLM_MXFP4_USE_MARLIN=1", "vllm", "serve",
                                   "openai/gpt-oss-20b"])
    assert found["mxfp4_moe_backend"] == "marlin"
    off, _ = parse_vllm_command(["VLLM_MXFP4_USE_MARLIN=0", "vllm", "serve", "m"])
    assert off["mxfp4_moe_backend"] == "auto"
    with pytest.raises(InputError, match="vLLM reads 1 or 0"):
        parse_vllm_command(["VLLM_MXFP4_USE_MARLIN=yes", "vllm", "serve", "m"])
    dense = Deployment(model=load_model("meta-llama/Llama-3.1-8B"), gpu=load_gpu("H100"),
                       engine=EngineConfig(mxfp4_moe_backend="marlin"))
    assert vllm_serve_env(dense) == []


def test_cli_flag_prices_marlin_and_refuses_a_bad_value() -> None:
    base = ["latency", "openai/gpt-oss-20b", "--gpu", "H100", "--prompt", "8192",
            "--output", "16", "--json"]
    import json

    auto = json.loads(run_cli(*base).out)
    marlin = json.loads(run_cli(*base, "--mxfp4-moe-backend", "marlin").out)
    assert marlin["ttft_s"] > 1.5 * auto["ttft_s"]
    assert marlin["tpot_s"] < auto["tpot_s"]
    assert "MXFP4 experts on Marlin (as vLLM < 0.12 ran them on Hopper)" in marlin["kernels"]
    assert "Marlin" not in auto["kernels"]
    bad = run_cli(*base, "--mxfp4-moe-backend", "cutlass")
    assert_one_line_error(bad)
    assert "--mxfp4-moe-backend 'cutlass': choose one of auto, marlin" in bad.err
