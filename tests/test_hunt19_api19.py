"""Session 19, api19: kvplan used from Python (notebooks) against the CLI's answers."""

from __future__ import annotations

import pytest

import kvplan
from tests.conftest import run_cli


@pytest.mark.parametrize(("model", "tp"), [("meta-llama/Llama-3.1-8B", 3),
                                           ("meta-llama/Llama-3.1-8B", 64),
                                           ("tiiuae/falcon-7b", 3)])
def test_kv_spec_refuses_a_tp_vllm_refuses_as_kvplan_kv_does(model: str, tp: int) -> None:
    # Llama-3.1-8B: 32 attention heads, 8 KV heads; TP 3 divides neither, so vLLM refuses it
    # (and so does `kvplan kv -tp 3`). kvplan.kv_spec answered 32,768 B/token: 2 x 32 layers
    # x (8 // 3 = 2) heads x 128 x 2 B, though one of three GPUs would hold 3 KV heads.
    cli = run_cli("kv", model, "-tp", str(tp))
    assert cli.code == 2
    with pytest.raises(kvplan.InputError) as err:
        kvplan.kv_spec(kvplan.load_model(model), tensor_parallel_size=tp)
    assert cli.err.strip() == f"error: {err.value}"
