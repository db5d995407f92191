"""hunt14 (dtype): the compute dtype, the KV dtype and the roofline under pipeline
parallelism, hand-checked against vLLM 0.11 and the datasheets."""

from __future__ import annotations

from kvplan.costs.step.constants import step_constants
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig


def test_roofline_pp2_reads_and_multiplies_the_lm_head_once_a_step() -> None:
    # vLLM runs the lm_head on the last PP stage only; the roofline prices the fullest stage
    # pp times, so that stage carries 1/pp of the head (as the measured path's
    # StageOps.lm_head_share). Llama-3.1-8B PP2, bf16: a layer holds q, o 4096 x 4096,
    # k, v 1024 x 4096, gate/up/down 3 x 14336 x 4096 and 2 norms of 4096 = 218,112,000
    # values; 16 layers x 2 B = 6,979,584,000 B, + the final norm 8,192 B + half the
    # 128,256 x 4,096 x 2 B head (1,050,673,152 / 2 = 525,336,576 B) = 7,504,928,768 B.
    # Before: the larger stage whole (16 layers + norm + the whole head = 8,030,265,344 B),
    # i.e. the head read twice a step (and its FLOPs, 2 x 128,256 x 4,096, charged twice).
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    golden = 16 * layer * 2 + 4096 * 2 + 128256 * 4096 * 2 // 2
    assert golden == 7_504_928_768
    k = step_constants(load_model("meta-llama/Llama-3.1-8B"),
                       EngineConfig(pipeline_parallel_size=2))
    assert k.weight_bytes == golden
    assert k.lm_head_flops_per_request == 2.0 * 128256 * 4096 / 2
