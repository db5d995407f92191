"""Hunt 15, workloads 2: traces and calibrate against `vllm bench serve`'s loaders and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import TraceError
from kvplan.specs.requests.traces import load_csv_trace
from tests.conftest import assert_one_line_error, run_cli

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_rows_with_zero_output_tokens_are_dropped_with_one_note(tmp_path: Path) -> None:
    # vLLM's BurstGPTDataset keeps rows with 'Response tokens' > 0 (a 0 is a failed request);
    # kvplan refused the whole file at the first 0. Row 1 (10 in, 0 out) is dropped: one
    # request is left, 12 in / 5 out, arriving at 0 s (arrivals count from the first kept row)
    path = _csv(tmp_path, AZURE + "2023-11-16 18:17:03.98,10,0\n2023-11-16 18:17:04.98,12,5\n")
    trace = load_csv_trace(path)
    assert (list(trace.prompt_tokens), list(trace.output_tokens)) == ([12], [5])
    assert list(trace.arrival_s) == [0.0] and trace.dropped_rows == 1
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(path), "--json")
    assert r.code == 0, r.err
    notes = [line for line in r.err.splitlines() if "0 output tokens" in line]
    assert notes == [f"note: {path}: dropped the 1 of its 2 rows with 0 output tokens (failed "
                     "requests; vLLM's BurstGPT loader drops them too); 1 requests left"]
    assert r.json()["completed"] == 1


def test_a_trace_with_no_usable_row_is_refused_in_one_line(tmp_path: Path) -> None:
    path = _csv(tmp_path, AZURE + "2023-11-16 18:17:03.98,10,0\n2023-11-16 18:17:04.98,12,0\n")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(path))
    assert_one_line_error(r)
    assert "no usable request: all 2 rows have 0 output tokens" in r.err
    neg = _csv(tmp_path, "t,p,g\n0,10,3\n1,20,-4\n", "n.csv")  # a negative count is still wrong
    with pytest.raises(TraceError, match=r"line 3, column 'g': output tokens must be a whole "
                                         r"number >= 0"):
        load_csv_trace(neg, "arrival=t,input=p,output=g")


def test_more_hash_ids_than_the_prompt_fills_are_refused_naming_the_row(tmp_path: Path) -> None:
    # Mooncake's hash_ids hold one id per 512-token block of the prompt: a 100-token prompt
    # fills cdiv(100, 512) = 1 block, so 8 ids cannot be its blocks (they were taken as is:
    # the planner's bound subtracted 8 x 512 cached tokens from a 100-token prompt)
    head = "timestamp,input_length,output_length,hash_ids\n"
    bad = _csv(tmp_path, head + "0,600,10,1 2\n5,100,20,1 2 3 4 5 6 7 8\n")
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(bad))
    assert_one_line_error(r)
    assert (f"{bad}, line 3, column 'hash_ids': 8 hash ids for a 100-token prompt, which fills "
            "at most 1 block(s) of 512 tokens") in r.err
    # 600 tokens fill cdiv(600, 512) = 2 blocks: 2 ids fit, and fewer (a hashed prefix) too
    good = _csv(tmp_path, head + "0,600,10,1 2\n5,100,20,1\n6,1024,5,\n", "g.csv")
    assert [len(h) for h in load_csv_trace(good).prefix_hashes or ()] == [2, 1, 0]
    # at hash_block_tokens=16 a 100-token prompt fills cdiv(100, 16) = 7 blocks, not 8
    cols = "arrival=timestamp,arrival_unit=ms,input=input_length,output=output_length," \
           "hashes=hash_ids,hash_block_tokens=16"
    with pytest.raises(TraceError, match=r"line 3, .*8 hash ids .* at most 7 block\(s\) of 16"):
        load_csv_trace(bad, cols)
