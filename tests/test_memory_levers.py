"""Does-not-fit advice names the levers that were computed to fit (TP searched, combinations)."""

import pytest

from kvplan.costs.memory import plan_memory
from kvplan.errors import DoesNotFitError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def _error(model: str, gpu: str, **engine: object) -> str:
    with pytest.raises(DoesNotFitError) as info:
        plan_memory(load_model(model), load_gpu(gpu), EngineConfig(**engine))  # type: ignore[arg-type]
    return str(info.value)


def test_weights_too_big_names_smallest_tp_that_fits() -> None:
    # Llama-3.1-70B bf16: ~131 GiB of weights; TP 2 leaves no room for a 131072-token request
    msg = _error("meta-llama/Llama-3.1-70B", "H100")
    assert "fits with --tensor-parallel-size 4" in msg
    plan_memory(load_model("meta-llama/Llama-3.1-70B"), load_gpu("H100"),
                EngineConfig(tensor_parallel_size=4))  # and it really does fit


def test_context_too_long_names_max_len_and_tp() -> None:
    msg = _error("meta-llama/Llama-3.1-8B", "L4", max_model_len=131072)
    assert "largest --max-model-len that fits is" in msg
    assert "--tensor-parallel-size 2" in msg


def test_combination_when_no_single_lever_fits() -> None:
    # fp8 KV alone is not enough at 131072 tokens on an L4 with 0.5 utilization; TP alone needs 4
    msg = _error("meta-llama/Llama-3.1-8B", "L4", max_model_len=131072,
                 gpu_memory_utilization=0.5)
    assert "fits with" in msg
