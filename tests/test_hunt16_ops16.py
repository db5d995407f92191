"""Hunt 16 (ops16): the step-time model's ops (``kvplan latency --explain``) against vLLM's
arithmetic and the kernel tables they are read from. Hand-checked."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.costs.step.constants import step_constants
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli

CATALOG = Path(__file__).parent.parent / "src" / "kvplan" / "specs" / "catalog" / "models"


def _falcon40b(tmp: Path) -> Path:
    """Falcon-40B's shape (new_decoder_architecture, parallel_attn; 128 heads / 8 KV over
    8,192, 60 layers) on the bundled falcon-7b config."""
    cfg = json.loads((CATALOG / "tiiuae--falcon-7b.json").read_text())
    cfg.update({"_name_or_path": "tiiuae/falcon-40b", "hidden_size": 8192,
                "num_attention_heads": 128, "num_kv_heads": 8, "num_hidden_layers": 60,
                "new_decoder_architecture": True, "multi_query": False, "parallel_attn": True})
    path = tmp / "falcon-40b.json"
    path.write_text(json.dumps(cfg))
    return path


def test_parallel_falcon_all_reduces_once_per_layer(tmp_path: Path) -> None:
    # vLLM falcon.py: with parallel_attn or new_decoder_architecture the attention `dense`
    # and the MLP `dense_4h_to_h` are RowParallelLinear(reduce_results=False); the layer
    # sums them and runs one tensor_model_parallel_all_reduce. Falcon-40B at TP8: 60 layers
    # x 1 + the embedding's = 61 (was 2 x 60 + 1 = 121, the all-reduce row doubled).
    path = _falcon40b(tmp_path)
    spec, tp8 = load_model(str(path)), EngineConfig(tensor_parallel_size=8)
    assert stage_ops(spec, tp8).allreduces == step_constants(spec, tp8).allreduces == 61
    r = run_cli("latency", str(path), "--gpu", "H100", "-tp", "8", "--prompt", "1000",
                "--output", "10", "--batch", "4", "--json")
    assert r.code == 0, r.err
    for step in r.json()["step_ops"]:
        rows = {o["op"]: o for o in step["ops"]}
        assert rows["all_reduce"]["layers"] == 61
    # a sequential Falcon (falcon-rw style: parallel_attn false, old architecture) reduces
    # each block's output: 2 per layer + 1
    cfg = json.loads(path.read_text())
    cfg.update({"new_decoder_architecture": False, "parallel_attn": False})
    seq = tmp_path / "falcon-seq.json"
    seq.write_text(json.dumps(cfg))
    assert stage_ops(load_model(str(seq)), tp8).allreduces == 2 * 60 + 1


def test_step_prices_the_lm_head_and_its_gather_at_every_request_count() -> None:
    # Gemma-2-9B at TP2 on L40S: the lm_head (n = 256,000 / 2 = 128,000, k = 3,584) and its
    # logits all-gather (R x 128,000 x 2 GPUs x 2 B over PCIe) from the measured tables:
    #   R = 1: 1,267.1 + 34.6 = 1,301.7 us;  R = 64: 1,432.8 + 848.0 = 2,280.8 us;
    #   R = 512: 1,956.3 + 6,769.3 = 8,725.6 us.
    # The step priced the head max(t(1), R t(512) / 512) = max(1,301.7, 1,090.7) = 1,301.7
    # us at R = 64, 43% under the tables (the gather grows from the first row). The chord
    # through R = 1 and 512 gives 1,301.7 + 63 x (8,725.6 - 1,301.7) / 511 = 2,217 us.
    import numpy as np

    from kvplan.costs import kernels as kn
    from kvplan.costs.kernels.gemm import served_gemm_s
    from kvplan.costs.step.coefficients import at
    from kvplan.costs.step.roofline import StepCostModel
    from kvplan.specs.hardware import load_gpu

    timer = StepCostModel(load_model("google/gemma-2-9b-it"), load_gpu("L40S"),
                          EngineConfig(tensor_parallel_size=2))
    co, ms = timer._co, timer.measured
    assert ms is not None
    head = next(g for g in stage_ops(load_model("google/gemma-2-9b-it"),
                                     EngineConfig(tensor_parallel_size=2)).gemms
                if g.name == "lm_head")
    assert (head.n, head.k) == (128000, 3584)

    def tables(r: int) -> float:
        rows = np.array([r])
        return float(served_gemm_s("L40S", rows, head.n, head.k, "bfloat16")[0]
                     + kn.logits_gather_s("L40S", rows, head.n, 2)[0])

    def step_head(r: int) -> float:  # the step's dense term less its per-token part, T = R
        dense = max(float(at(co.gemm_t, r)) + co.lm_s * r, float(at(co.weights_t, r)))
        return dense - (float(at(co.weights_t, r)) - ms.lm_fixed_s)

    assert round(tables(1) * 1e6, 1) == 1301.7 and round(tables(64) * 1e6, 1) == 2280.8
    assert round(tables(512) * 1e6, 1) == 8725.6
    assert abs(step_head(1) - tables(1)) < 1e-12 and abs(step_head(512) - tables(512)) < 1e-9
    chord = tables(1) + 63 * (tables(512) - tables(1)) / 511
    assert round(step_head(64) * 1e6) == round(chord * 1e6) == 2217
    for r in (8, 32, 64, 128, 256):  # within 6% of the tables between (was 29% at R = 32)
        assert abs(step_head(r) / tables(r) - 1) < 0.06, r
