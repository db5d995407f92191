"""`kvplan request` runs the lesson's schedule (one decode step per output token: the
2,048 + 128 request ends at 2,176 tokens, 680 MiB) and says where vLLM's ends: its prefill
step samples the first output token and the last is never cached, so 127 decode steps
leave 2,175 tokens x 327,680 B = 712,704,000 B (679.69 MiB); `kvplan latency` prices
those 127 steps."""

from __future__ import annotations

import json

from tests.conftest import run_cli

ARGS = ("request", "meta-llama/Llama-2-70b-hf", "--prompt", "2048", "--output", "128")


def test_the_text_gives_the_lessons_and_vllms_end() -> None:
    r = run_cli(*ARGS)
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "final cache 680.00 MiB (713,031,680 bytes;" in text  # the lesson's 2,176 tokens
    assert ("vLLM samples the first output token in the prefill step and never caches the "
            "last: it ends at 2,175 tokens, 679.69 MiB (712,704,000 bytes), after 127 decode "
            "steps") in text


def test_json_keys() -> None:
    d = json.loads(run_cli(*ARGS, "--json").out)
    assert d["vllm_final_tokens"] == 2175 and d["vllm_final_bytes"] == 2175 * 327_680
    one = json.loads(run_cli(*ARGS[:-1], "1", "--json").out)  # one output token: prefill only
    assert one["vllm_final_tokens"] == 2048 and one["vllm_final_bytes"] == 671_088_640
