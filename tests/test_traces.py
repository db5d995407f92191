"""Trace loaders: bundled traces read back exactly; malformed files name file, line and column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kvplan.errors import TraceError, UnknownNameError
from kvplan.specs.requests.traces import (
    BUNDLED_TRACES,
    TraceFormat,
    bundled_trace_path,
    load_csv_trace,
    load_trace,
    parse_trace_columns,
)

# (name, rows, input mean, output mean, span s) from data/traces/README.md (the shared README).
README_STATS = [
    ("azure-code", 8_819, 2_048, 27.9, 3_436),
    ("azure-conv", 19_366, 1_155, 211, 3_502),
    ("mooncake-conversation", 12_031, 12_035, 343, 3_537),
    ("mooncake-synthetic", 3_993, 15_325, 149, 1_022),
    ("arxiv-summarization", 28_257, 2_588, 291, None),
    ("bwb", 33_768, 1_067, 1_613, None),
    ("sharegpt", 16_384, 219.64, 199.30, None),
    ("sharegpt-multiturn", 30_731, 2_340, 439, None),
]

# The first two rows of each file, read by eye: (arrival s, input, output).
FIRST_ROWS = {
    "azure-code": [(0.0, 4808, 10), (0.052, 3180, 8)],  # 18:17:03.97996 -> 18:17:04.03196
    "azure-conv": [(0.0, 374, 44), (4.314579, 396, 109)],  # 18:15:46.68059 -> 18:15:50.995169
    "mooncake-conversation": [(0.0, 6758, 500), (0.0, 7322, 490)],
    "mooncake-synthetic": [(0.0, 40160, 6), (0.0, 36640, 4)],
    "arxiv-summarization": [(None, 3772, 54), (None, 2015, 156)],
    "bwb": [(None, 1047, 1368), (None, 1154, 1461)],
    "sharegpt": [(None, 13, 120), (None, 25, 770)],
    "sharegpt-multiturn": [(None, 74, 918), (None, 290, 905)],
}


@pytest.mark.parametrize(("name", "rows", "input_mean", "output_mean", "span"), README_STATS)
def test_bundled_trace_matches_readme_stats(name, rows, input_mean, output_mean, span):
    trace = load_trace(name)
    assert len(trace) == rows
    assert trace.prompt_tokens.mean() == pytest.approx(input_mean, rel=5e-4)
    assert trace.output_tokens.mean() == pytest.approx(output_mean, rel=5e-3)
    if span is None:
        assert trace.arrival_s is None
    else:
        assert trace.arrival_s is not None
        assert trace.arrival_s[-1] == pytest.approx(span, abs=0.5)


@pytest.mark.parametrize("name", sorted(FIRST_ROWS))
def test_bundled_trace_first_rows(name):
    trace = load_trace(name)
    for i, (arrival, prompt, output) in enumerate(FIRST_ROWS[name]):
        assert (int(trace.prompt_tokens[i]), int(trace.output_tokens[i])) == (prompt, output)
        if arrival is not None:
            assert trace.arrival_s is not None
            assert trace.arrival_s[i] == pytest.approx(arrival, abs=1e-9)


def test_azure_last_arrivals_are_seconds_since_first_row():
    # code: 19:14:19.9280160 - 18:17:03.9799600; conv: 19:14:08.4025270 - 18:15:46.6805900
    assert load_trace("azure-code").arrival_s[-1] == pytest.approx(3435.948056, abs=1e-6)
    assert load_trace("azure-conv").arrival_s[-1] == pytest.approx(3501.721937, abs=1e-6)


def test_mooncake_hashes_and_ms_timestamps():
    conv = load_trace("mooncake-conversation")
    assert conv.hash_block_tokens == 512
    assert conv.prefix_hashes is not None
    assert conv.prefix_hashes[0].tolist() == list(range(14))
    assert conv.prefix_hashes[1].tolist() == [0, *range(14, 28)]
    assert conv.arrival_s[-1] == pytest.approx(3536.999)  # 3536999 ms
    synth = load_trace("mooncake-synthetic")
    assert synth.prefix_hashes[1].tolist() == list(range(79, 151))
    assert synth.arrival_s[-1] == pytest.approx(1022.025)


@pytest.mark.parametrize("name", ["mooncake-conversation", "mooncake-synthetic"])
def test_mooncake_hashes_cover_each_prompt(name):
    # README: (len(hash_ids) - 1) * 512 < input_length <= len(hash_ids) * 512 on every row.
    trace = load_trace(name)
    counts = np.array([len(h) for h in trace.prefix_hashes])
    assert np.all((counts - 1) * 512 < trace.prompt_tokens)
    assert np.all(trace.prompt_tokens <= counts * 512)


def test_load_trace_is_cached_and_read_only():
    trace = load_trace("azure-conv")
    assert load_trace("azure-conv") is trace
    with pytest.raises(ValueError):
        trace.prompt_tokens[0] = 1


def test_every_bundled_trace_has_a_sources_note():
    for name in BUNDLED_TRACES:
        path = bundled_trace_path(name)
        assert path.is_file()
        assert (path.parent / "SOURCES.md").is_file()


def test_unknown_trace_name_suggests_the_close_one():
    with pytest.raises(UnknownNameError, match="did you mean 'azure-conv'"):
        load_trace("azure-cnv")


# --- user CSVs -----------------------------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_user_csv_with_own_column_names(tmp_path):
    path = write(tmp_path, "t,p,g\n5.0,10,3\n5.5,20,4\n7,30,5\n")
    trace = load_csv_trace(path, "arrival=t,input=p,output=g")
    assert trace.name == "t"
    assert trace.arrival_s.tolist() == [0.0, 0.5, 2.0]  # seconds from the first row
    assert trace.prompt_tokens.tolist() == [10, 20, 30]
    assert trace.output_tokens.tolist() == [3, 4, 5]


def test_user_csv_without_arrivals_and_float_counts(tmp_path):
    path = write(tmp_path, "in,out\n10.0,3\n\n20,4\n")  # a blank line is skipped
    trace = load_csv_trace(path, "input=in,output=out")
    assert trace.arrival_s is None
    assert trace.prompt_tokens.tolist() == [10, 20]


def test_user_csv_ms_units_hashes_and_datetime_with_offset(tmp_path):
    path = write(tmp_path, "ms,i,o,h\n1000,600,2,0 1\n3500,100,1,0\n")
    spec = "arrival=ms,arrival_unit=ms,input=i,output=o,hashes=h,hash_block_tokens=512"
    trace = load_csv_trace(path, spec)
    assert trace.arrival_s.tolist() == [0.0, 2.5]
    assert [h.tolist() for h in trace.prefix_hashes] == [[0, 1], [0]]
    stamps = write(
        tmp_path,
        "ts,i,o\n2024-05-10 00:00:00.5+00:00,1,1\n2024-05-10 00:00:02.000000+00:00,1,1\n",
        "tz.csv",
    )
    fmt = TraceFormat(arrival="ts", arrival_unit="datetime", input="i", output="o")
    assert load_csv_trace(stamps, fmt).arrival_s.tolist() == [0.0, 1.5]


def test_known_layouts_are_recognised_from_the_header(tmp_path):
    path = write(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:17:03.9799600,4808,10\n"
        "2023-11-16 18:17:04.0319600,3180,8\n",
    )
    trace = load_csv_trace(path)
    assert trace.arrival_s[1] == pytest.approx(0.052)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t,p,g\n0,10,3\n1,x,4\n", r"t\.csv, line 3, column 'p': 'x' is not a whole number"),
        ("t,p,g\n0,10,3\n1,20,-4\n", r"line 3, column 'g': output tokens must be a whole num"),
        ("t,p,g\n0,10,3\n1,0,4\n", r"line 3, column 'p': input tokens must be a positive"),
        ("t,p,g\n0,10,3\n1,2.5,4\n", r"line 3, column 'p': '2.5' is not a whole number"),
        ("t,p,g\n0,10,3\nsoon,20,4\n", r"line 3, column 't': arrival 'soon' is not a number"),
        ("t,p,g\n0,10,3\n1,20\n", r"line 3, column 'g': the row has no such cell"),
        ("t,p\n0,10\n", r"line 1: no column 'g' for the output tokens; the header has t, p"),
        ("", r"t\.csv, line 1: the file is empty"),
        ("t,p,g\n", r"t\.csv, line 2: no requests"),
    ],
)
def test_malformed_trace_names_file_line_and_column(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(TraceError, match=message) as info:
        load_csv_trace(path, "arrival=t,input=p,output=g")
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_malformed_datetime_and_hash_cells(tmp_path):
    path = write(tmp_path, "ts,i,o,h\n2023-11-16 18:00:00,1,1,0\nlater,1,1,0 x\n")
    with pytest.raises(TraceError, match=r"line 3, column 'ts': 'later' is not a date-time"):
        load_csv_trace(path, "arrival=ts,arrival_unit=datetime,input=i,output=o")
    with pytest.raises(TraceError, match=r"line 3, column 'h': hash ids must be space-separated"):
        load_csv_trace(path, "input=i,output=o,hashes=h")
    empty = write(tmp_path, "ts,i,o\n2023-11-16 18:00:00,1,1\n,1,1\n", "e.csv")
    with pytest.raises(TraceError, match=r"e\.csv, line 3, column 'ts': '' is not a date-time"):
        load_csv_trace(empty, "arrival=ts,arrival_unit=datetime,input=i,output=o")


def test_unreadable_files_name_the_file(tmp_path):
    missing = tmp_path / "nope.csv"
    with pytest.raises(TraceError, match=r"nope\.csv: cannot read the trace"):
        load_csv_trace(missing, "input=a,output=b")
    with pytest.raises(TraceError, match="cannot read the trace"):
        load_csv_trace(tmp_path, "input=a,output=b")  # a directory
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"a,b\n\xff\xfe,1\n")
    with pytest.raises(TraceError, match=r"bin\.csv: cannot read the trace"):
        load_csv_trace(binary, "input=a,output=b")


def test_unknown_layout_asks_for_columns(tmp_path):
    path = write(tmp_path, "x,y\n1,2\n")
    with pytest.raises(TraceError, match="--trace-columns"):
        load_csv_trace(path)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("input=a", "needs output=COLUMN"),
        ("input=a,output", "is not role=column"),
        ("input=a,output=b,prompt=c", "unknown role 'prompt'"),
        ("input=a,output=b,arrival_unit=h", "arrival_unit must be s, ms or datetime"),
        ("input=a,output=b,hashes=h,hash_block_tokens=x", "hash_block_tokens must be a whole"),
    ],
)
def test_bad_trace_columns_spec(spec, message):
    with pytest.raises(TraceError, match=message):
        parse_trace_columns(spec)


def test_trace_columns_spec_defaults():
    fmt = parse_trace_columns(" arrival = ts , input=i,output=o,hashes=h ")
    assert fmt == TraceFormat(
        arrival="ts", input="i", output="o", hashes="h", hash_block_tokens=512
    )
