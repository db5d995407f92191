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
