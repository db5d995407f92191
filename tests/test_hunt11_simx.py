"""hunt11-simx: the serving simulator on exotic but valid deployments (PP, DP / EP, async
scheduling, hybrid, MLA and sliding-window models, long-prefill caps, short max_model_len,
tiny KV pools): vLLM 0.11's rules where kvplan got them wrong, and invariants that every
such run must keep (the compiled core equal to the Python loop to the bit, blocks within
the pool, every request finished or rejected with a reason, tokens conserved)."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

# -- vLLM 0.11 refuses --async-scheduling with pipeline parallelism ---------------------------
# vllm/engine/arg_utils.py (EngineArgs.create_engine_config, since PR #19970 in 0.10.0, lifted
# only by PR #32359 in 2026): "Async scheduling is not supported with pipeline-parallel-size
# > 1." kvplan accepted the pair and priced it (max(stage, host) over a PP stage chain).

def test_async_scheduling_with_pp_is_refused() -> None:
    with pytest.raises(InputError, match=r"async-scheduling.*pipeline-parallel-size"):
        EngineConfig(async_scheduling=True, pipeline_parallel_size=2)
    # either alone stays valid, as in vLLM
    assert EngineConfig(async_scheduling=True).pipeline_parallel_size == 1
    assert EngineConfig(pipeline_parallel_size=4).async_scheduling is False


def test_async_scheduling_with_pp_cli_one_line() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-70B", "-tp", "2", "-pp", "2",
                "--async-scheduling", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "--pipeline-parallel-size" in r.err
