"""Does-not-fit advice names the levers that were computed to fit (TP searched, combinations)."""

import pytest

from kvplan.costs.memory.plan import plan_memory
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


def test_heads_that_do_not_split_fall_back_to_other_levers() -> None:
    # Falcon-7B has 71 heads: no TP degree divides them; its ~13.4 GiB of bf16 weights exceed
    # half an L4, so fp8 weights or a higher utilization are the levers that fit
    msg = _error("tiiuae/falcon-7b", "L4", gpu_memory_utilization=0.5)
    assert "--quantization fp8" in msg and "--gpu-memory-utilization 0.62" in msg
    assert "--tensor-parallel-size" not in msg


@pytest.mark.parametrize(("model", "gpu", "given", "least"), [
    # Llama-3.1-8B on H100 (79.18 GiB as CUDA counts it): at 0.45 one 131,072-token request
    # (16 GiB of KV) does not fit (15.74 GiB left), at 0.46 it does (0.01 x 79.18 = 0.79 GiB more)
    ("meta-llama/Llama-3.1-8B", "H100", 0.1, 0.46),
    ("tiiuae/falcon-7b", "L4", 0.5, 0.62),
])
def test_utilization_lever_is_the_least_that_fits(model: str, gpu: str, given: float,
                                                  least: float) -> None:
    # it said 0.95, true but not what a user needs to know: the least value that fits
    msg = _error(model, gpu, gpu_memory_utilization=given)
    assert f"--gpu-memory-utilization {least:.2f}" in msg
    plan_memory(load_model(model), load_gpu(gpu), EngineConfig(gpu_memory_utilization=least))
    with pytest.raises(DoesNotFitError):
        plan_memory(load_model(model), load_gpu(gpu),
                    EngineConfig(gpu_memory_utilization=round(least - 0.01, 2)))


def test_cuda_visible_totals_from_vllm_logs() -> None:
    """vLLM prints "Free memory on device (free/TOTAL GiB)"; TOTAL is what it multiplies by the
    utilization: H200 139.72 GiB (vLLM issue #23192), A100-80GB 79.25 GiB, H100 79.18 GiB."""
    from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
    from kvplan.units import GiB

    for gpu, total_gib in (("H200", 139.72), ("A100-80GB-SXM", 79.25), ("H100", 79.18)):
        assert round(cuda_total_bytes(load_gpu(gpu)) / GiB, 2) == total_gib


def test_tp_must_split_or_replicate_kv_heads_evenly() -> None:
    """vLLM's QKVParallelLinear: kv_heads % tp == 0, or tp % kv_heads == 0 (replication)."""
    from kvplan.errors import InputError

    qwen = load_model("Qwen/Qwen2.5-7B")  # 28 attention heads, 4 KV heads
    with pytest.raises(InputError, match="KV heads"):
        plan_memory(qwen, load_gpu("H100"), EngineConfig(tensor_parallel_size=7))
    llama = load_model("meta-llama/Llama-3.1-8B")  # 32 heads, 8 KV heads: TP 16 replicates
    assert plan_memory(llama, load_gpu("H100"), EngineConfig(tensor_parallel_size=16)).num_blocks


def test_mamba_state_dtype_flags_from_the_cli() -> None:
    """--mamba-ssm-cache-dtype float32 widens Nemotron-H's SSM state: the attention block is
    raised further (vLLM HybridAttentionMambaModelConfig), and a bad value exits 2."""
    from tests.conftest import assert_one_line_error, run_cli

    base = ("capacity", "nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H200", "--json")
    auto = run_cli(*base).json()
    wide = run_cli(*base, "--mamba-ssm-cache-dtype", "float32").json()
    assert (auto["block_size"], wide["block_size"]) == (2080, 4128)
    assert_one_line_error(run_cli(*base, "--mamba-ssm-cache-dtype", "bf16"))
