"""Hunt 13, docs: every figure README.md and docs/*.md quote against the command that prints
it today. Each row names the document, the words it quotes and the command's answer; both
must hold, so a doc that drifts from the code (or code that drifts from the doc) fails."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """The document's text with line breaks folded to spaces (quotes may wrap)."""
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())


def test_plan_help_states_the_searched_expert_parallel_default() -> None:
    """Before: `kvplan plan --help` said EP defaults to "on exactly when DP > 1", but the
    space searches both on and off at DP > 1 (space.ep_values; docs/planner.md)."""
    from kvplan.analysis.plan.parallel.space import EP_WITH_DP, ep_values

    assert ep_values((EP_WITH_DP,), 2) == (True, False)
    assert ep_values((EP_WITH_DP,), 1) == (False,)
    r = run_cli("plan", "--help")
    assert r.code == 0, r.err
    assert "(default: both when DP > 1, off at DP 1)" in " ".join(r.out.split())
    assert "on exactly when" not in r.out
    assert "both on and off when dp > 1, off at dp 1" in _doc("docs/planner.md")
