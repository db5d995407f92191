"""Hunt 16 (capacity): vLLM 0.11 memory arithmetic for dense and MoE text models under unusual
but valid settings."""

from __future__ import annotations

import pytest

from kvplan.analysis.plan.space import valid_tp_degrees
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.kv import check_tensor_parallel
from tests.conftest import assert_one_line_error, run_cli


@pytest.mark.parametrize(
    ("model", "tp", "words"),
    [
        # Llama-2-13B: 40 heads divide by 5, but the MLP's 13,824 rows do not (2,764.8):
        # MergedColumnParallelLinear asserts output_size % tp_size == 0
        ("meta-llama/Llama-2-13b-hf", "5", "intermediate_size 13,824"),
        # Qwen2.5-7B: 28 heads, 4 KV heads replicated 7x at TP 28, but the 64-padded
        # vocabulary 152,064 = 2^9 x 3^3 x 11 has no factor 7: VocabParallelEmbedding's
        # divide(num_embeddings_padded, tp_size) asserts
        ("Qwen/Qwen2.5-7B", "28", "152,064 embedding rows"),
        # Falcon-7B: 71 heads (MQA) and 18,176 = 71 x 256 MLP rows split, 65,024 vocab rows do not
        ("tiiuae/falcon-7b", "71", "65,024 embedding rows"),
    ],
)
def test_tp_that_cannot_split_the_dense_shards_is_refused(model: str, tp: str,
                                                          words: str) -> None:
    r = run_cli("capacity", model, "-tp", tp)
    assert_one_line_error(r)
    assert f"--tensor-parallel-size {tp} must divide" in r.err and words in r.err


def test_tp_that_splits_every_shard_still_plans() -> None:
    # Llama-2-13B at TP 8: 40 heads -> 5, 13,824 -> 1,728, 32,000 -> 4,000 rows a GPU
    assert run_cli("capacity", "meta-llama/Llama-2-13b-hf", "-tp", "8", "--json").code == 0
    # the planner's candidates (check_tensor_parallel) skip the degrees vLLM cannot start
    llama = load_model("meta-llama/Llama-2-13b-hf")
    assert valid_tp_degrees(llama, 8) == (1, 2, 4, 8)
    with pytest.raises(InputError, match="intermediate_size 13,824"):
        check_tensor_parallel(llama, 10)
