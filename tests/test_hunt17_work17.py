"""Hunt 17 (work17): workloads and traces against vLLM 0.11.0's `vllm bench serve`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.conftest import run_cli


# -------------------- D1: a trailing partial hash block was never shared
# Mooncake-format traces list one hash id per 512 prompt tokens, the last block partial
# (len(hash_ids) = cdiv(input_length, 512); 99.8 % of mooncake-conversation's prompts end
# inside a block). The id names the block's content: in both bundled Mooncake traces every
# repeated id chain has one input length (88 and 194 chains), and AIPerf's trace replay
# (ai-dynamo/aiperf PromptGenerator._generate_cached_prompt) builds each id's tokens once and
# truncates the last block, so equal chains send equal leading tokens. vLLM 0.11.0 then hits
# every full 16-token block of the earlier prompt but the one holding the last token
# (kv_cache_manager.get_computed_blocks: at most prompt - 1 tokens). Two 600-token prompts
# with hash_ids [0, 5]: the second hits (600 - 1) // 16 * 16 = 592 tokens; hit rate
# 592 / 1200 = 0.49333. kvplan shared only whole hash blocks: 512 / 1200 = 0.42667.
def test_trace_keys_share_the_partial_trailing_hash_block() -> None:
    from kvplan.sim.state import trace_keys

    same = trace_keys([np.array([0, 5]), np.array([0, 5])], np.array([600, 600]), 512, 16)
    assert len(same[0]) == 600 // 16 == 37 and same[0] == same[1]
    # another last id shares only the whole block 0: its 32 KV blocks
    other = trace_keys([np.array([0, 5]), np.array([0, 6])], np.array([600, 600]), 512, 16)
    assert other[0][:32] == other[1][:32] and not set(other[0][32:]) & set(other[1][32:])
    # a list shorter than the prompt: the tokens past it stay unique (2 x 512 // 16 = 64)
    short = trace_keys([np.array([0, 5])], np.array([1400]), 512, 16)
    assert len(short[0]) == 64


def test_identical_mooncake_prompts_hit_the_partial_block(tmp_path: Path) -> None:
    trace = tmp_path / "same.csv"
    trace.write_text("timestamp,input_length,output_length,hash_ids\n"
                     "0,600,10,0 5\n1000,600,10,0 5\n")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(trace), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["total_input_tokens"] == 1200
    assert abs(doc["prefix_cache_hit_rate"] - 592 / 1200) < 1e-12
