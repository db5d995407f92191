"""One note per kind: a config's absent fields in one line, a repeated note said once."""

from __future__ import annotations

from kvplan.report.notes import merged_notes
from tests.conftest import run_cli


def test_defaults_merge_into_one_line_at_the_first() -> None:
    notes = ["torch_dtype absent: bfloat16 assumed",
             "vocab_size absent: transformers default 262208",
             "tie_word_embeddings absent: transformers default True",
             "torch_dtype absent: bfloat16 assumed"]
    assert merged_notes(notes) == [
        "torch_dtype absent: bfloat16 assumed",
        "2 fields absent from config.json, transformers defaults used: vocab_size = 262208, "
        "tie_word_embeddings = True"]


def test_a_single_default_keeps_its_own_words() -> None:
    assert merged_notes(["vocab_size absent: transformers default 262208"]) == [
        "vocab_size absent: transformers default 262208"]
    assert merged_notes([]) == []


def test_gemma3_kv_prints_one_note_naming_all_five_defaults() -> None:
    """Before: five 'note:' lines, one per absent field."""
    r = run_cli("kv", "google/gemma-3-27b-it")
    assert r.code == 0
    text = r.out + r.err
    assert text.count("note:") == 1
    flat = " ".join(text[text.index("note:"):].split())
    assert flat == ("note: 5 fields absent from config.json, transformers defaults used: "
                    "sliding_window_pattern = 6, vocab_size = 262208, max_position_embeddings "
                    "= 131072, tie_word_embeddings = True, hidden_activation = "
                    "'gelu_pytorch_tanh'")


def test_a_variant_note_is_said_once_per_run(tmp_path) -> None:
    """kvplan report loads the model for several sections; the note came twice."""
    r = run_cli("report", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "-o",
                str(tmp_path / "r.html"))
    assert r.code == 0, r.err
    assert r.err.count("note: using the config of meta-llama/Llama-3.1-8B") == 1
