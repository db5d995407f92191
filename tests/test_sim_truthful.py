"""simulate tells the truth: rejections grouped by reason, overload said beside the metrics."""

from __future__ import annotations

from kvplan.analysis.plan.why.rejections import group_rejections
from tests.conftest import run_cli


def test_rejections_group_by_wording_with_counts_and_examples() -> None:
    rejected = {
        9: "prompt + output = 9000 tokens exceeds max_model_len 8192",
        2: "prompt + output = 8200 tokens exceeds max_model_len 8192",
        5: "needs 900 KV blocks alone; the pool has 800 usable",
        4: "prompt + output = 10000 tokens exceeds max_model_len 8192",
        7: "prompt + output = 8193 tokens exceeds max_model_len 8192",
    }
    groups = group_rejections(rejected)
    assert [(g.kind, g.count) for g in groups] == [
        ("prompt + output = N tokens exceeds max_model_len N", 4),
        ("needs N KV blocks alone; the pool has N usable", 1),
    ]
    assert [i for i, _ in groups[0].examples] == [2, 4, 7]  # first three by index
    assert groups[0].line().endswith("; and 1 more)")
    assert groups[0].to_json()["examples"][0] == {"index": 2, "reason": rejected[2]}


def test_one_line_per_reason_on_a_real_trace() -> None:
    args = ("simulate", "google/gemma-2-27b", "--gpu", "A100-40GB-SXM", "-tp", "2",
            "--dataset", "mooncake-conversation", "--num-prompts", "600", "--request-rate", "10")
    text = run_cli(*args)
    assert text.code == 0, text.err
    data = run_cli(*args, "--json").json()
    lines = [line for line in text.out.splitlines() if "rejected: " in line]
    assert len(lines) == len(data["rejected_by_reason"]) >= 1
    assert sum(g["count"] for g in data["rejected_by_reason"]) == data["failed"] > 1
    n = data['rejected_by_reason'][0]['count']
    assert lines[0].startswith(f"{n} request{'' if n == 1 else 's'} rejected: ")


def test_overloaded_run_says_so_in_text_and_json() -> None:
    args = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "400",
            "--request-rate", "200", "--random-input-len", "4000", "--random-output-len", "500")
    data = run_cli(*args, "--json").json()
    load = data["overload"]
    assert load["overloaded"] is True
    assert load["sustained_rate_req_s"] < 0.9 * load["offered_rate_req_s"]
    assert load["waiting_at_last_arrival"] > load["waiting_at_mid_arrivals"]
    text = run_cli(*args)
    assert "overloaded: accepted requests arrived at" in " ".join(text.out.split())


def test_a_server_that_keeps_up_is_not_called_overloaded() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "200",
                "--request-rate", "5", "--random-input-len", "1000", "--random-output-len",
                "100", "--json")
    load = r.json()["overload"]
    assert load["overloaded"] is False and load["waiting_at_last_arrival"] == 0
    assert abs(load["sustained_rate_req_s"] - load["offered_rate_req_s"]) < 1.0


def test_all_at_once_has_no_rate_verdict() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.2-1B", "--num-prompts", "20", "--json")
    assert r.json()["overload"] is None and r.json()["rejected_by_reason"] == []


def test_overload_counts_only_the_served_requests_arrivals() -> None:
    """Sent at 0..7 s, requests 1 and 6 rejected: the window is (3.5, 7] s, in which 4, 5
    and 7 arrived (not 6) and 4 and 5 finished (at 4.5 and 5.5 s; 7's answer is at 7.5)."""
    from types import SimpleNamespace

    import numpy as np

    from kvplan.analysis.overload import overload

    sent = np.arange(8, dtype=np.float64)
    served = np.array([0, 2, 3, 4, 5, 7])
    r = SimpleNamespace(num_requests=8, rejected={1: "x", 6: "y"}, sent_s=sent, num_steps=2,
                        finish_s=sent + 0.5, finished=served,
                        steps=SimpleNamespace(start_s=np.array([0.0, 5.0]),
                                              waiting=np.array([0, 3])))
    load = overload(r)  # type: ignore[arg-type]
    assert load is not None and load.overloaded
    assert (load.window_start_s, load.window_end_s) == (3.5, 7.0)
    assert (load.offered_rate_req_s, load.sustained_rate_req_s) == (3 / 3.5, 2 / 3.5)
    assert (load.waiting_at_mid_arrivals, load.waiting_at_last_arrival) == (0, 3)
