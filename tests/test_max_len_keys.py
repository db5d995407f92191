"""The context length a config.json gives, as vLLM 0.11's ``_get_and_verify_max_len`` reads it:
the smallest of its length keys, except that Command-R's model_max_length is taken as is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.specs.model import ModelSpec

CATALOG = Path(__file__).resolve().parents[1] / "src/kvplan/specs/catalog/models"


def _model(tmp_path: Path, **fields: object) -> ModelSpec:
    cfg = json.loads((CATALOG / "meta-llama--Llama-2-7b-hf.json").read_text(encoding="utf-8"))
    cfg.update(fields)
    (tmp_path / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return kvplan.load_model(str(tmp_path))


@pytest.mark.parametrize(("fields", "length"), [
    ({}, 4096),                                          # max_position_embeddings alone
    ({"n_positions": 2048}, 2048),                       # a smaller key wins (was 4,096)
    ({"seq_length": 8192}, 4096),                        # a larger one does not
    ({"max_sequence_length": 1024, "seq_len": 3000}, 1024),
    ({"model_max_length": 16384}, 16384),                # Command-R: taken as it is
    # absent, LlamaConfig's own default (2,048) is an attribute vLLM reads: min(2,048, 2,500)
    ({"max_position_embeddings": None, "seq_length": 2500}, 2048),
    ({"max_position_embeddings": None, "seq_length": 1500}, 1500),
])
def test_the_smallest_length_key_wins(tmp_path: Path, fields: dict[str, object],
                                      length: int) -> None:
    assert _model(tmp_path, **fields).max_position_embeddings == length


def test_rope_scaling_scales_the_smallest(tmp_path: Path) -> None:
    m = _model(tmp_path, n_positions=2048, rope_scaling={"type": "linear", "factor": 4.0})
    assert m.max_position_embeddings == 8192  # min(4,096, 2,048) x 4
