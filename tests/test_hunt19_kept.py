"""hunt19: a layer the checkpoint's ignore list keeps 16-bit runs vLLM's
UnquantizedLinearMethod, so the step prices its GEMM from the bf16 table, not the
checkpoint's quantized one (the weights were already sized 16-bit: test_hunt18_quant18)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from kvplan.costs.kernels.gemm import served_gemm_s
from kvplan.costs.step.explain import explain_steps
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.serving import EngineConfig

_MODELS = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}


def _timer(exclude: list[str]) -> StepCostModel:
    cfg = json.loads((_MODELS / "meta-llama--Llama-3.1-8B.json").read_text())
    q = {**NVFP4, "exclude_modules": exclude}
    model = parse_config({**cfg, "quantization_config": q}, name="q", file="t")
    return StepCostModel(model, load_gpu("B200"), EngineConfig(),
                         Profile(step_overhead_s=0.0, prefill_overhead_s=0.0))


def _rows(timer: StepCostModel, phase: str) -> dict[str, float]:
    step = next(s for s in explain_steps(timer, 64, 2048, 8192) if s.phase == phase)
    return {o.op: o.seconds for o in step.ops}


def test_attention_kept_16bit_is_priced_as_a_bf16_gemm() -> None:
    # NVFP4 Llama-3.1-8B with "model.layers.*.self_attn*" excluded (DeepSeek-R1-FP4 style):
    # qkv_proj (n = 4,096 + 2 x 1,024 = 6,144, k = 4,096) and o_proj (4,096 x 4,096) run in
    # bf16 on all 32 layers; the MLP stays NVFP4. Each row = 32 x the bf16 table's time at
    # the step's rows (64 decode requests; a prefill chunk of 8,192 tokens).
    kept, quant = _timer(["lm_head", "model.layers.*.self_attn*"]), _timer(["lm_head"])
    for phase, m in (("decode", 64), ("prefill", 8192)):
        rows, base = _rows(kept, phase), _rows(quant, phase)
        for op, n, k in (("qkv_proj", 6144, 4096), ("o_proj", 4096, 4096)):
            bf16 = 32 * float(served_gemm_s("B200-SXM-180GB", np.array([m]), n, k,
                                            "bfloat16")[0])
            assert abs(rows[op] - bf16) <= 1e-9, (phase, op, rows[op], bf16)
            assert rows[op] > base[op]  # a 16-bit GEMM is never faster than NVFP4 here
        assert rows["gate_up_proj"] == base["gate_up_proj"]  # the MLP is still NVFP4


def test_the_step_prices_the_kept_layers_as_its_explain_rows_do() -> None:
    # the step itself (not only --explain) moves: before, both deployments summed to the
    # same 33.3 ms prefill step, the excluded attention priced at NVFP4 rates
    steps = [{s.phase: s.step_s for s in explain_steps(t, 64, 2048, 8192)}
             for t in (_timer(["lm_head", "model.layers.*.self_attn*"]), _timer(["lm_head"]))]
    assert steps[0]["prefill"] > steps[1]["prefill"] * 1.15
    assert steps[0]["decode"] > steps[1]["decode"]
