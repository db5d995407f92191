"""hunt18 quant18: weight bytes per GPU as vLLM 0.11 loads quantized checkpoints, checked
against hand arithmetic from config.json and vLLM's quantization methods."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.costs.memory.plan import plan_memory
from kvplan.errors import InputError
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

_MODELS = Path(__file__).parents[1] / "src/kvplan/specs/catalog/models"


def _llama8b(quantization_config: dict[str, Any] | None = None) -> ModelSpec:
    cfg = json.loads((_MODELS / "meta-llama--Llama-3.1-8B.json").read_text())
    if quantization_config is not None:
        cfg = {**cfg, "quantization_config": quantization_config}
    return parse_config(cfg, name="q", file="t")


def _weights(model: ModelSpec, gpu: str, **engine: Any) -> int:
    return plan_memory(model, load_gpu(gpu), EngineConfig(**engine)).budget.weights_bytes


FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
             "weight_block_size": [128, 128]}


def test_fp8_on_ampere_holds_marlins_16bit_group_scales() -> None:
    """A100 has no fp8 tensor cores: vLLM 0.11's Fp8LinearMethod (use_marlin) runs
    prepare_fp8_layer_for_marlin, which turns the float32 block scales
    (ceil(N/128), ceil(K/128)) into Marlin group scales (ceil(K/128), N) in bf16.
    Llama-3.1-8B per layer, N x K: q 4,096 x 4,096, k and v 1,024 x 4,096, o 4,096 x 4,096,
    gate_up 28,672 x 4,096, down 4,096 x 14,336 = 218,103,808 weights.
    Marlin: K/128 x N x 2 B = 218,103,808 / 64 = 3,407,872 B; priced (blocks x 4 B):
    218,103,808 / 4,096 = 53,248 B; 3,354,624 B more a layer, x 32 layers = 107,347,968 B.
    Per tensor (-q fp8 on the bf16 checkpoint): (1, N) bf16 per layer = 43,008 x 2 B =
    86,016 B instead of 6 x 4 B: 85,992 x 32 = 2,751,744 B more. H100 (native fp8) keeps the
    checkpoint's scales."""
    block = _llama8b(FP8_BLOCK)
    assert _weights(block, "A100-80GB-SXM") - _weights(block, "H100") == 107_347_968
    plain = _llama8b()
    extra = (_weights(plain, "A100-80GB-SXM", quantization="fp8")
             - _weights(plain, "H100", quantization="fp8"))
    assert extra == 2_751_744


NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}


def test_modelopt_exclude_modules_keep_attention_16bit() -> None:
    """nvidia's NVFP4 exports list what stays unquantized in exclude_modules (vLLM's
    ModelOpt is_layer_excluded: '*' wildcards; DeepSeek-R1-FP4 keeps its attention in bf16,
    "-v2 additionally quantizes the wo module"). Llama-3.1-8B attention: 32 x (2 x 4,096 x
    4,096 + 2 x 1,024 x 4,096) = 1,342,177,280 weights, bf16 2 B instead of nvfp4's 0.5 B +
    one fp8 scale per 16 (0.5625 B): 1,342,177,280 x 1.4375 = 1,929,379,840 B more on a B200."""
    quantized = _weights(_llama8b({**NVFP4, "exclude_modules": ["lm_head"]}), "B200")
    excluded = ["lm_head", "model.layers.*.self_attn*"]
    kept = _weights(_llama8b({**NVFP4, "exclude_modules": excluded}), "B200")
    assert kept - quantized == 1_929_379_840


W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized",
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
             "group_size": 128}}}}


def test_compressed_tensors_ignore_list_keeps_listed_layers_16bit() -> None:
    """compressed-tensors ``ignore`` (``re:`` a regex from the start of the module name, else
    the exact name; vLLM's should_ignore_layer, a fused layer's shards all listed): layer 0's
    MLP stays bf16. gate_up 28,672 x 4,096 + down 4,096 x 14,336 = 176,160,768 weights at 2 B
    instead of 4 bits + a bf16 scale per 128 (0.515625 B): x 1.484375 = 261,488,640 B; the
    same by exact names; 'mlp.gate' (a router name) does not catch gate_proj."""
    base = _weights(_llama8b({**W4A16, "ignore": ["lm_head"]}), "H100")
    regex = _llama8b({**W4A16, "ignore": ["lm_head", r"re:model\.layers\.0\.mlp\..*"]})
    names = _llama8b({**W4A16, "ignore": ["lm_head", "model.layers.0.mlp.gate_proj",
                                          "model.layers.0.mlp.up_proj",
                                          "model.layers.0.mlp.down_proj", "mlp.gate"]})
    assert _weights(regex, "H100") - base == 261_488_640
    assert _weights(names, "H100") - base == 261_488_640


def test_modelopt_fp8_is_refused_where_vllm_refuses_it() -> None:
    """ModelOptFp8Config.get_min_capability() is 89 and it has no Marlin path:
    VllmConfig._get_quantization_config stops on an A100 (8.0) or A10G (8.6) ("The
    quantization method modelopt is not supported for the current GPU. Minimum capability:
    89"); ROCm's supported_quantization lacks modelopt. kvplan priced 9,117,507,584 B on an
    A100. NVFP4 ModelOpt (min 80, Marlin) and fp8 (Fp8Config, min 80) still load there;
    the CLI says it in one line, exit 2."""
    mo_fp8 = _llama8b({"quant_method": "modelopt", "quant_algo": "FP8"})
    for gpu in ("A100-80GB-SXM", "A10G", "MI300X"):
        with pytest.raises(InputError, match="modelopt"):
            _weights(mo_fp8, gpu)
    assert _weights(mo_fp8, "H100") == 9_114_755_840
    assert _weights(_llama8b(NVFP4), "A100-80GB-SXM") == 6_061_301_760
    with pytest.raises(InputError, match="Minimum capability: 89"):
        _weights(_llama8b(), "A100-80GB-SXM", quantization="modelopt")
    assert_one_line_error(run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "A100",
                                  "-q", "modelopt"))


def test_an_excluded_kv_b_proj_is_not_copied_to_16_bit() -> None:
    """MLA keeps a bf16 W_UK / W_UV copy of a quantized kv_b_proj only; one the ignore list
    keeps bf16 is viewed, not copied (mla_absorb). DeepSeek-V3 NVFP4 on B200 TP 8, attention
    excluded (nvidia's DeepSeek-R1-FP4 layout). Per layer per GPU: q_a 1,536 x 7,168 and
    kv_a 576 x 7,168 (replicated), q_b 3,072 x 1,536, kv_b 4,096 x 512, o 7,168 x 2,048 =
    36,634,624 weights: bf16 73,269,248 B - nvfp4 20,606,976 B = 52,662,272 B x 61 layers =
    3,212,398,592 B, less the copy no longer made (512 x 16 heads x 256 x 2 B = 4,194,304 B a
    layer, 255,852,544 B): 2,956,546,048 B."""
    cfg = json.loads((_MODELS / "deepseek-ai--DeepSeek-V3.json").read_text())

    def v3(exclude: list[str]) -> ModelSpec:
        q = {**NVFP4, "exclude_modules": exclude}
        return parse_config({**cfg, "quantization_config": q}, name="v3", file="t")

    base = _weights(v3(["lm_head"]), "B200", tensor_parallel_size=8)
    kept = _weights(v3(["lm_head", "model.layers.*.self_attn*"]), "B200", tensor_parallel_size=8)
    assert kept - base == 2_956_546_048


def test_an_ignore_entry_that_is_no_regex_is_one_error_line(tmp_path: Path) -> None:
    """'re:[abc' cannot compile: one 'error: field ...' line, exit 2, not a traceback."""
    cfg = json.loads((_MODELS / "meta-llama--Llama-3.1-8B.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "quantization_config": {**W4A16,
                                                               "ignore": ["re:[abc"]}}))
    result = run_cli("capacity", str(path))
    assert_one_line_error(result)
    assert "quantization_config.ignore" in result.err


GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}


def test_a_gptq_checkpoint_with_a_quantized_lm_head_holds_it_in_4_bits() -> None:
    """GPTQ / AWQ configs with ``lm_head: true`` (GPTQConfig / GPTQMarlinConfig /
    AWQMarlinConfig lm_head_quantized): vLLM builds ParallelLMHead with the GPTQ method, so
    the 128,256 x 4,096 head (525,336,576 weights) holds 4 bits + a bf16 scale per 128
    (0.515625 B) instead of 2 B: 1,050,673,152 - 270,876,672 = 779,796,480 B less.
    lm_head: false (the usual export) keeps it 16-bit."""
    plain = _weights(_llama8b({**GPTQ, "lm_head": False}), "A100-80GB-SXM")
    head4 = _weights(_llama8b({**GPTQ, "lm_head": True}), "A100-80GB-SXM")
    assert plain - head4 == 779_796_480


def test_a_quantized_lm_head_on_machete_keeps_its_qzeros_and_g_idx() -> None:
    """On Hopper the quantized head runs GPTQMarlinLinearMethod's Machete kernel like the
    decoder layers (128,256 % 128 = 0, 4,096 % 64 = 0), keeping int32 qzeros (4,096 / 128 x
    128,256 x 4 / 32 x 4 B = 2,052,096 B) and g_idx (4,096 x 4 B = 16,384 B):
    779,796,480 - 2,068,480 = 777,728,000 B less than a 16-bit head."""
    plain = _weights(_llama8b({**GPTQ, "lm_head": False}), "H100")
    head4 = _weights(_llama8b({**GPTQ, "lm_head": True}), "H100")
    assert plain - head4 == 777_728_000
