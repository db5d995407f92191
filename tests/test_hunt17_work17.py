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


# -------------------- D2: a trace whose rows are not in arrival order was refused
# Each row's arrival column says when that request arrives; rows logged out of order (merged
# server logs, a file sorted by request id) are a valid trace of the same requests. kvplan
# refused the file ("arrival 1 is earlier than the row before (2); sort the file by
# arrival", exit 2). Now the rows are replayed in arrival order (a stable sort: equal times
# keep the file's order) with one note; --num-prompts N still takes the first N in time.
def _unsorted(tmp_path: Path) -> Path:
    trace = tmp_path / "late.csv"
    trace.write_text("ts,p,o\n2,30,3\n0,10,1\n5,50,5\n0,11,2\n1,20,2\n")
    return trace


def test_unsorted_trace_rows_are_replayed_in_arrival_order(tmp_path: Path) -> None:
    from kvplan.specs.requests.traces import load_csv_trace

    t = load_csv_trace(_unsorted(tmp_path), "arrival=ts,input=p,output=o")
    assert t.arrival_s is not None
    assert t.arrival_s.tolist() == [0.0, 0.0, 1.0, 2.0, 5.0]
    assert t.prompt_tokens.tolist() == [10, 11, 20, 30, 50]  # the two at t=0 in file order
    assert t.output_tokens.tolist() == [1, 2, 2, 3, 5]
    assert t.reordered_rows == 5


def test_unsorted_mooncake_rows_keep_their_hashes_and_drop_zero_outputs(tmp_path: Path) -> None:
    from kvplan.specs.requests.traces import load_csv_trace

    trace = tmp_path / "mc.csv"
    trace.write_text("timestamp,input_length,output_length,hash_ids\n"
                     "3000,600,4,0 5\n1000,100,0,9\n2000,700,3,0 6\n")
    t = load_csv_trace(trace)
    # the 0-output row (t = 1 s) is dropped; the rest sorted, from the first kept: 2 s, 3 s
    assert t.arrival_s is not None and t.arrival_s.tolist() == [0.0, 1.0]
    assert t.prompt_tokens.tolist() == [700, 600]
    assert t.prefix_hashes is not None
    assert [h.tolist() for h in t.prefix_hashes] == [[0, 6], [0, 5]]


def test_unsorted_trace_simulates_with_one_note(tmp_path: Path) -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(_unsorted(tmp_path)),
                "--trace-columns", "arrival=ts,input=p,output=o", "--num-prompts", "3",
                "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["total_input_tokens"] == 10 + 11 + 20  # the first 3 in time
    notes = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(notes) == 1 and "not in arrival order" in notes[0], r.err


# -------------------- D3: Mooncake's own JSON-lines traces were refused
# Mooncake publishes its traces as JSON lines (kvcache-ai/Mooncake FAST25-release/traces/
# *.jsonl: {"timestamp": ms, "input_length": .., "output_length": .., "hash_ids": [..]}),
# and NVIDIA's AIPerf and Dynamo replay that file as is; kvplan said "this is JSON, not CSV;
# write the trace as CSV" (exit 2). The same file as CSV was read. Now the JSON lines are
# read as the CSV is: the same arrays, and each bad cell named by line and key.
_JSONL = ('{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}\n'
          '\n'
          '{"timestamp": 10535, "input_length": 672, "output_length": 26, "hash_ids": [46, 47]}\n'
          '{"timestamp": 27482, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}\n')


def test_mooncake_jsonl_reads_as_its_csv(tmp_path: Path) -> None:
    from kvplan.specs.requests.traces import load_csv_trace

    jsonl = tmp_path / "trace.jsonl"
    jsonl.write_text(_JSONL)
    csv = tmp_path / "trace.csv"
    csv.write_text("timestamp,input_length,output_length,hash_ids\n0,655,52,46 47\n"
                   "10535,672,26,46 47\n27482,655,52,46 47\n")
    a, b = load_csv_trace(jsonl), load_csv_trace(csv)
    assert a.arrival_s is not None and a.arrival_s.tolist() == [0.0, 10.535, 27.482]
    assert a.prompt_tokens.tolist() == [655, 672, 655] == b.prompt_tokens.tolist()
    assert a.output_tokens.tolist() == [52, 26, 52] == b.output_tokens.tolist()
    assert a.prefix_hashes is not None and b.prefix_hashes is not None
    assert [h.tolist() for h in a.prefix_hashes] == [[46, 47]] * 3
    assert a.hash_block_tokens == b.hash_block_tokens == 512


def test_mooncake_jsonl_simulates(tmp_path: Path) -> None:
    jsonl = tmp_path / "trace.jsonl"
    jsonl.write_text(_JSONL)
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(jsonl), "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["completed"], doc["total_input_tokens"]) == (3, 655 + 672 + 655)
    assert doc["request_rate"] == "trace"


def test_bad_jsonl_lines_are_one_error_line(tmp_path: Path) -> None:
    from tests.conftest import assert_one_line_error

    for body, words in (
        ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n{"timestamp": 1,\n',
         "line 2: not a JSON object"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n[1, 2]\n',
         "line 2: not a JSON object"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
         '{"timestamp": 1, "input_length": "x", "output_length": 2}\n',
         "line 2, column 'input_length': 'x' is not a whole number"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 2}\n'
         '{"timestamp": 1, "output_length": 2}\n',
         "line 2, column 'input_length': '' is not a whole number"),
        ('{"timestamp": 0, "input_length": 1000, "output_length": 2, "hash_ids": [1, "a"]}\n',
         "line 1, column 'hash_ids': hash ids must be space-separated whole numbers"),
    ):
        path = tmp_path / "bad.jsonl"
        path.write_text(body)
        r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(path),
                    "--trace-columns", "arrival=timestamp,arrival_unit=ms,input=input_length,"
                    "output=output_length" + (",hashes=hash_ids" if "hash" in body else ""))
        assert_one_line_error(r)
        assert words in r.err, r.err


# -------------------- D4: a dataset name in other capitals had no suggestion
# vLLM's docs write the dataset "ShareGPT"; `--dataset ShareGPT` listed every name but
# suggested none (difflib compares case-sensitively: 'ShareGPT' is not close to 'sharegpt').
def test_dataset_name_in_capitals_suggests_the_name() -> None:
    from tests.conftest import assert_one_line_error

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "ShareGPT")
    assert_one_line_error(r)
    assert "did you mean 'sharegpt'?" in r.err, r.err


# -------------------- D5: blank lines before the header read as "the file is empty"
# Blank lines after the rows were skipped, blank lines before the header row (or before a
# JSON-lines trace's first object) were refused: "line 1: the file is empty; expected a CSV
# header row", for a file that is not empty. They are skipped too (pandas.read_csv's
# skip_blank_lines default reads such a file), and line numbers stay the file's own.
def test_blank_lines_before_the_header_are_skipped(tmp_path: Path) -> None:
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    csv = tmp_path / "lead.csv"
    csv.write_text("\n \r\ntimestamp,input_length,output_length,hash_ids\n0,100,10,\n"
                   "1000,200,0,\n2000,300,5,\n")
    t = load_csv_trace(csv)
    assert t.prompt_tokens.tolist() == [100, 300] and t.arrival_s is not None
    assert t.arrival_s.tolist() == [0.0, 2.0]
    jsonl = tmp_path / "lead.jsonl"
    jsonl.write_text('\n\n{"timestamp": 0, "input_length": 100, "output_length": 10}\n'
                     '{"timestamp": 5, "input_length": "x", "output_length": 10}\n')
    try:
        load_csv_trace(jsonl, "arrival=timestamp,arrival_unit=ms,input=input_length,"
                       "output=output_length")
    except TraceError as exc:
        assert "lead.jsonl, line 4, column 'input_length': 'x'" in str(exc), exc
    else:
        raise AssertionError("the bad cell was read")
    bad = tmp_path / "bad.csv"
    bad.write_text("\n\nts,p,o\n0,1,1\n1,x,1\n")
    try:
        load_csv_trace(bad, "arrival=ts,input=p,output=o")
    except TraceError as exc:
        assert "bad.csv, line 5, column 'p': 'x'" in str(exc), exc
    else:
        raise AssertionError("the bad cell was read")
    empty = tmp_path / "empty.csv"
    empty.write_text("\n\n")
    try:
        load_csv_trace(empty)
    except TraceError as exc:
        assert "the file is empty" in str(exc)
    else:
        raise AssertionError("an empty file was read")


def test_header_errors_name_the_headers_own_line(tmp_path: Path) -> None:
    from kvplan.errors import TraceError
    from kvplan.specs.requests.traces import load_csv_trace

    path = tmp_path / "lead.csv"
    path.write_text("\n\nts,p,out\n0,1,1\n")
    try:
        load_csv_trace(path, "arrival=ts,input=p,output=o")
    except TraceError as exc:
        assert "lead.csv, line 3: no column 'o' for the output tokens" in str(exc), exc
    else:
        raise AssertionError("a missing column was read")


# -------------------- D6: --time-scale with --request-rate on a timed trace, wrong advice
# `--dataset azure-code --request-rate 3 --time-scale 2` was told "use --request-rate for
# random and length-only datasets": azure-code is timed and --request-rate was given. The
# drawn arrivals replace the trace's times, so --time-scale has none to rescale: say that.
def test_time_scale_with_a_rate_on_a_timed_trace_says_why() -> None:
    from tests.conftest import assert_one_line_error

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "azure-code",
                "--request-rate", "3", "--time-scale", "2")
    assert_one_line_error(r)
    assert "--request-rate replaces" in r.err and "random and length-only" not in r.err, r.err
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "bwb", "--time-scale", "2")
    assert_one_line_error(r)
    assert "use --request-rate for random and length-only datasets" in r.err, r.err


def test_any_row_order_reads_as_the_rows_sorted_by_arrival() -> None:
    """Property (D2): a timed trace written in any row order reads as its rows sorted by
    arrival with a stable sort; 0-output rows are dropped first, arrivals start at 0."""
    import tempfile

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from kvplan.specs.requests.traces import load_csv_trace

    row = st.tuples(st.integers(0, 5), st.integers(1, 900), st.integers(0, 3))

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(st.lists(row, min_size=1, max_size=8))
    def check(rows: list[tuple[int, int, int]]) -> None:
        kept = sorted((r for r in rows if r[2] > 0), key=lambda r: r[0])  # stable
        text = "t,p,o\n" + "".join(f"{t},{p},{o}\n" for t, p, o in rows)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "t.csv"
            path.write_text(text)
            try:
                trace = load_csv_trace(path, "arrival=t,input=p,output=o")
            except Exception:
                assert not kept  # only a file with no usable row is refused
                return
        assert trace.prompt_tokens.tolist() == [p for _, p, _ in kept]
        assert trace.output_tokens.tolist() == [o for *_, o in kept]
        assert trace.arrival_s is not None
        assert trace.arrival_s.tolist() == [float(t - kept[0][0]) for t, *_ in kept]

    check()


# -------------------- D7: drawn arrivals past the clock were told about ms and --time-scale
# `--dataset bwb --request-rate 1e-6 --num-prompts 10000` (last arrival 1e10 s) was told "a
# trace in ms needs --trace-columns arrival_unit=ms, else lower --time-scale ...": its
# arrivals are drawn at --request-rate (and --time-scale is refused for it). Drawn arrivals
# are told to raise the rate or send fewer requests; a trace's own times keep the advice.
def test_drawn_arrivals_past_the_clock_get_the_rate_advice() -> None:
    from tests.conftest import assert_one_line_error

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "bwb", "--request-rate",
                "1e-6", "--num-prompts", "10000")
    assert_one_line_error(r)
    assert "2^52 us" in r.err and "--request-rate" in r.err, r.err
    assert "arrival_unit" not in r.err and "--time-scale" not in r.err, r.err
