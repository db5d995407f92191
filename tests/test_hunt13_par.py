"""hunt13 (par): parallelism across commands, hand-checked against vLLM 0.11's arithmetic."""

from __future__ import annotations

import json

from kvplan.costs.memory.params import stage_weight_bytes
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli


def test_mixtral_pp2_builds_both_vocab_tables_on_every_stage() -> None:
    # vLLM 0.11 mixtral.py: MixtralModel builds embed_tokens and MixtralForCausalLM builds
    # lm_head unconditionally (no PPMissingLayer), so each PP stage holds both tables.
    # Per layer: q, o 4096 x 4096; k, v 1024 x 4096; 8 experts x 3 x 14336 x 4096; router
    # 8 x 4096; 2 norms of 4096 = 1,451,270,144 values; 16 layers a stage, 2 B each.
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 8 * 3 * 14336 * 4096 + 8 * 4096 + 2 * 4096
    golden = 16 * layer * 2 + 2 * 32000 * 4096 * 2 + 4096 * 2  # 46,964,940,800 B
    m = load_model("mistralai/Mixtral-8x7B-v0.1")
    assert golden == 46_964_940_800
    assert [stage_weight_bytes(m, pp=2, stage=s) for s in (0, 1)] == [golden, golden]


def test_gpt_oss_pp3_middle_stage_holds_the_vocab_tables() -> None:
    # vLLM 0.11 gpt_oss.py: GptOssModel.embedding and GptOssForCausalLM.lm_head on every stage;
    # one table is 201,088 x 2,880 x 2 B = 1,158,266,880 B, so the middle stage of PP3
    # (8 of 24 layers, like the others) weighs as much as the first and the last.
    m = load_model("openai/gpt-oss-20b")
    stages = [stage_weight_bytes(m, pp=3, stage=s) for s in range(3)]
    assert stages[0] == stages[1] == stages[2]


def _tpot_s(*flags: str) -> float:
    out = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "1024",
                  "--output", "128", "--batch", "8", "--json", *flags)
    assert out.code == 0, out.err
    return float(json.loads(out.out)["tpot_s"])


def test_pp_step_runs_the_lm_head_once() -> None:
    # A PP step passes the stages in turn and the last one runs the lm_head once; kvplan
    # prices the fullest stage pp times, so the lm_head enters each copy at 1 / pp.
    # Llama-3.1-8B PP2 (16 + 16 layers): stage 0 was priced twice with no lm_head
    # (128,256 x 4,096, ~0.36 ms at 8 rows on an H100), so TPOT fell below PP1's
    # (7.98 ms vs 8.29 ms) though PP2 does the same work plus a hop.
    m = load_model("meta-llama/Llama-3.1-8B")
    one, two = stage_ops(m, EngineConfig()), stage_ops(m, EngineConfig(pipeline_parallel_size=2))
    head = [g for g in two.gemms if g.name == "lm_head"]
    assert [(g.n, g.k, g.count) for g in head] == [(128_256, 4096, 1)]
    assert (one.lm_head_share, two.lm_head_share) == (1.0, 0.5)
    assert _tpot_s("-pp", "2") > _tpot_s()
