"""The joint aggregated/disaggregated answer of `kvplan plan --disagg` as text (its JSON:
kvplan.analysis.disagg.joint_doc)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.analysis.disagg.joint_doc import PRICE_NOTE, joint_json
from kvplan.analysis.disagg.joint_doc import usd as _usd

if TYPE_CHECKING:
    from kvplan.analysis.disagg.candidates import JointSide

__all__ = ["joint_json", "render_joint"]


def _ms(x: float | None) -> str:
    return "open" if x is None else f"{x:,.1f}"


def render_joint(side: JointSide, out: Any) -> None:
    """The joint answer as text: the winner and why, the best disaggregated fleet, levers."""
    doc = joint_json(side)
    out.print("\n[bold]One space: aggregated and disaggregated (kvplan plan --disagg)[/bold]")
    out.print(doc["versus"], soft_wrap=True)
    dis = doc["best_disaggregated"]
    if dis is not None:
        _render_disagg(dis, out)
        for r in doc["levers"]:
            dms = r["delta_binding_ms"]
            out.print(f"  what-if {r['change']}: {r['fleet']} {_usd(r['usd_per_hour'])}, "
                      f"{r['binding_key']} {_ms(r['binding_ms'])}"
                      f"{'' if dms is None else f' ({dms:+,.1f})'}, "
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
        band = "no band" if chk["band"] is None else \
            f"band {_ms(chk['band'][0])} - {_ms(chk['band'][1])}, " + \
            ("met" if chk["met_at_edge"] else "missed") + " at its pessimistic edge"
        out.print(f"  {chk['key']} {_ms(chk['value'])}, 95 % interval {_ms(low)} - "
                  f"{_ms(high)}{noise}; {band}", soft_wrap=True)
    for role, line in dis["serve"].items():
        out.print(f"  {role}: {line}", soft_wrap=True)
