"""`kvplan plan --disagg`: aggregated and disaggregated candidates searched in one space."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.analysis.disagg.candidates import JointSide


def check_disagg_args(args: dict[str, Any]) -> None:
    """--kv-link needs --disagg; --disagg compares at one offered load (analysis.disagg.side)."""
    from kvplan.analysis.disagg.side import check_disagg_args as check

    check(args)


def disagg_side(args: dict[str, Any], plan: Any) -> JointSide:
    """The joint side of the plan (kvplan.analysis.disagg.side)."""
    from kvplan.analysis.disagg.side import disagg_side as side
    from kvplan.cli.flags import parse_flag

    return side(args, plan, parse_flag)


def render_side(side: JointSide, plan: Any, out: Any) -> None:
    """The joint answer as text (cli.plan_joint_out)."""
    from kvplan.cli.plan_joint_out import render_joint

    render_joint(side, out)


def side_json(side: JointSide, plan: Any) -> dict[str, Any]:
    """The `joint` key of `kvplan plan --disagg --json` (cli.plan_joint_out)."""
    from kvplan.cli.plan_joint_out import joint_json

    return joint_json(side)
