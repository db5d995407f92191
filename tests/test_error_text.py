"""Error lines at the extremes (fuzz-3 R7): long echoed values cut, one bounded line, each
location named once, a near-whole count printed as given."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.errors import located
from kvplan.report.error_text import MAX_LINE, cut, error_line
from tests.conftest import assert_one_line_error, run_cli
from tests.fuzz2_support import bench


def test_cut_keeps_head_and_last_quarter() -> None:
    assert cut("abcdefghij", 10) == "abcdefghij"
    assert cut("abcdefghijkl", 10) == "abcde...kl"  # 5 + 3 + 10 // 4 = 10
    assert len(cut("x" * 5000, 80)) == 80


def test_short_messages_pass_whole() -> None:
    assert error_line("unknown GPU 'H1000'\n  (see kvplan gpus)") == (
        "error: unknown GPU 'H1000' (see kvplan gpus)")
    path = "/tmp/" + "d" * 90 + "/config.json"  # 107 characters: over 100, cut
    short = "/tmp/" + "d" * 80 + "/config.json"  # 97 characters: shown whole
    assert error_line(f"{short}: bad") == f"error: {short}: bad"
    assert error_line(f"{path}: bad") == "error: /tmp/" + "d" * 52 + "...ddddddd/config.json: bad"


def test_a_nested_list_echo_is_cut_to_80() -> None:
    value = "[" * 500 + "]" * 500
    line = error_line(f"b.json:1: 'max_num_seqs' must be a number, got {value}")
    assert line == ("error: b.json:1: 'max_num_seqs' must be a number, got "
                    + "[" * 57 + "..." + "]" * 20)


def test_a_quoted_value_with_spaces_is_cut_keeping_its_quotes() -> None:
    value = "ab " * 700
    line = error_line(f"unknown --kv-cache-dtype {value!r}: choose one of auto, fp8")
    assert line == ("error: unknown --kv-cache-dtype '" + ("ab " * 19)[:56] + "..."
                    + ("ab " * 7)[2:] + "': choose one of auto, fp8")
    assert len(line) < MAX_LINE


def test_the_line_is_at_most_500_characters() -> None:
    line = error_line(" ".join(["word"] * 1000))
    assert MAX_LINE == 500
    assert len(line) == MAX_LINE and line.startswith("error: word word")
    assert line.endswith("..." + " word" * 25)  # the last quarter, 125 characters


def test_apostrophes_in_words_are_not_quotes() -> None:
    """A 290-character message of kvplan's own (test_vllm_logs) was cut between "gate's" and
    "vLLM's" as if they quoted a value."""
    message = ("vLLM refuses --tensor-parallel-size 8 for config: the output_size of gate's and "
               "up's weight = 192 per GPU is not divisible by weight quantization block_n = 128; "
               "use a TP degree that keeps it a multiple of 128 (vLLM's recipes add "
               "--enable-expert-parallel, which kvplan does not model)")
    assert error_line(message) == f"error: {message}"


def test_located_prefixes_once() -> None:
    assert located("b.json:1", ValueError("x must be 1")) == "b.json:1: x must be 1"
    assert located("b.json:1", "b.json:1: x must be 1") == "b.json:1: x must be 1"
    assert located("b.json:1", "b.json:10: y") == "b.json:1: b.json:10: y"


def _calibrate(tmp_path: Path, **changes: object) -> str:
    (tmp_path / "bench.json").write_text(bench(**changes))
    result = run_cli("calibrate", "bench.json", "--gpu", "H100", cwd=str(tmp_path))
    assert_one_line_error(result)
    return result.err.strip()


def test_calibrate_nested_value_one_location_and_cut(tmp_path: Path) -> None:
    """fuzz-3 R7: was 'error: bench.json:1: bench.json:1: ...' and 2,000+ characters."""
    deep: object = []
    for _ in range(500):
        deep = [deep]
    err = _calibrate(tmp_path, max_num_seqs=deep)
    assert err == ("error: bench.json:1: 'max_num_seqs' must be a number, got "
                   + "[" * 57 + "..." + "]" * 20)


def test_calibrate_near_whole_count_printed_as_given(tmp_path: Path) -> None:
    """fuzz-3 R7: 1.0000001 was printed rounded, as 'got 1'."""
    err = _calibrate(tmp_path, completed=1.0000001)
    assert err == "error: bench.json:1: 'completed' must be a whole number, got 1.0000001"


def test_pasted_2000_character_flag_value_is_one_short_line() -> None:
    result = run_cli("capacity", "--", "vllm", "serve", "meta-llama/Llama-3.2-1B",
                     "--max-model-len", "9" * 2000)
    assert_one_line_error(result)
    assert result.err.strip() == ("error: --max-model-len not a whole number: '"
                                  + "9" * 56 + "..." + "9" * 19 + "' (e.g. 8192, 8k, 32K)")
    assert json.dumps(result.err)  # plain text
