"""The joint aggregated/disaggregated answer of `kvplan plan --disagg` as text (its JSON:
kvplan.analysis.disagg.joint_doc)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.analysis.disagg.joint_doc import PRICE_NOTE, joint_json
from kvplan.analysis.disagg.joint_doc import usd as _usd
from kvplan.report.plan.plan_band_text import term_delta_text, term_text, value_text

if TYPE_CHECKING:
    from kvplan.analysis.disagg.candidates import JointSide

__all__ = ["joint_json", "render_joint"]


def render_joint(side: JointSide, out: Any) -> None:
    """The joint answer as text: the winner and why, the best disaggregated fleet, levers."""
    doc = joint_json(side)
    out.print("\n[bold]One space: aggregated and disaggregated (kvplan plan --disagg)[/bold]")
    out.print(doc["versus"], soft_wrap=True)
    dis = doc["best_disaggregated"]
    if dis is not None:
        _render_disagg(dis, out)
        for r in doc["levers"]:
            key, dms = r["binding_key"], r["delta_binding_ms"]  # goodput_share: a share
            out.print(f"  what-if {r['change']}: {r['fleet']} {_usd(r['usd_per_hour'])}, "
                      f"{term_text(key, r['binding_ms'])}"
                      f"{'' if dms is None else f' ({term_delta_text(key, dms)})'}, "
                      f"{'meets' if r['meets_slo'] else 'misses'} the SLO"
                      f"{'; ' + r['note'] if r['note'] else ''}", soft_wrap=True)
    out.print(f"pricing: {PRICE_NOTE}", soft_wrap=True)
    out.print("candidates: " + ", ".join(f"{n} {s}" for s, n in doc["stages"].items()))


def _render_disagg(dis: dict[str, Any], out: Any) -> None:
    out.print(f"best disaggregated: {dis['fleet']} {_usd(dis['usd_per_hour'])}; binding "
              f"{dis['binding']['primary']}: {dis['binding']['why']}", soft_wrap=True)
    for chk in dis["slo_at_band_edge"]:
        low, high = dis["intervals"].get(chk["key"], [None, None])
        noise = " (within noise)" if chk["key"] in dis["within_noise"] else ""
        key = chk["key"]  # goodput_share: a share of requests, the others ms

        def v(x: float | None, key: str = key) -> str:
            return value_text(key, x)

        band = "no band" if chk["band"] is None else \
            f"band {v(chk['band'][0])} - {v(chk['band'][1])}, " + \
            ("met" if chk["met_at_edge"] else "missed") + " at its pessimistic edge"
        out.print(f"  {term_text(key, chk['value'])}, 95 % interval {v(low)} - "
                  f"{v(high)}{noise}; {band}", soft_wrap=True)
    for role, line in dis["serve"].items():
        out.print(f"  {role}: {line}", soft_wrap=True)
