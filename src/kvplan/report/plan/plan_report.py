"""`kvplan report --plan FILE`: a saved `kvplan plan --json` answer as report sections."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import InputError
from kvplan.report.charts import chart_spec
from kvplan.report.plan.plan_band_text import limit_text, value_text
from kvplan.report.report_page import Section
from kvplan.units import counted

SCHEMA = "kvplan.plan/v1"
MAX_DEPTH = 64
"""Deepest nesting a saved plan may have (kvplan writes about 6 levels)."""


def load_plan_json(path: str | Path) -> dict[str, Any]:
    """Read a saved plan; InputError (one line) when it is not kvplan's plan JSON."""
    import json

    from kvplan.input_file import read_text, reason
    from kvplan.jsonread import depth, loads

    try:
        data = loads(read_text(Path(path)))
    except OSError as exc:
        raise InputError(f"--plan {path}: cannot read it ({reason(exc)})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--plan {path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    if depth(data) > MAX_DEPTH:  # rendering walks it recursively (dataclasses.asdict)
        raise InputError(f"--plan {path}: nested {depth(data)} deep; a saved plan is at most "
                         f"{MAX_DEPTH} deep")
    if not (isinstance(data, dict) and data.get("schema") == SCHEMA
            and isinstance(data.get("summary"), dict)):
        raise InputError(f"--plan {path}: not a saved plan (expected \"schema\": "
                         f"\"{SCHEMA}\" from kvplan plan --json)")
    _check_shape(path, data)
    return data


_LISTS_OF_OBJECTS = (("candidates",), ("levers",), ("summary", "slo_at_band_edge"))
"""Where a saved plan holds lists of objects that the report reads key by key."""


def _check_shape(path: str | Path, data: dict[str, Any]) -> None:
    """Refuse (one line) a hand-edited plan whose parts the report would trip over: inputs
    not an object, a list of objects holding something else, or NaN / Infinity (kvplan plan
    --json writes null for an unknown number; the page's JSON cannot carry them)."""
    bad = [] if isinstance(data.get("inputs"), dict | None) else ["inputs is not an object"]
    for keys in _LISTS_OF_OBJECTS:
        parent = data if len(keys) == 1 else data.get(keys[0])
        value = parent.get(keys[-1]) if isinstance(parent, dict) else None
        if value is not None and not (isinstance(value, list)
                                      and all(isinstance(v, dict) for v in value)):
            bad.append(f"{'.'.join(keys)} is not a list of objects")
    if _has_nonfinite(data):
        bad.append("it holds NaN or Infinity (kvplan writes null for an unknown number)")
    if bad:
        raise InputError(f"--plan {path}: not a saved plan as kvplan plan --json writes it: "
                         f"{'; '.join(bad)}; save it again with kvplan plan --json")


def _has_nonfinite(obj: Any) -> bool:
    """Whether any number in the document is NaN or +-Infinity (walked without recursion)."""
    import math

    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return True
        stack.extend(item.values() if isinstance(item, dict) else
                     item if isinstance(item, list) else ())
    return False


def _dp(c: dict[str, Any]) -> str:
    """' DP4 EP' for a DP / EP candidate (documents older than the keys have none)."""
    dp = c.get("data_parallel_size") or 1
    return (f" DP{dp}" if dp > 1 else "") + (" EP" if c.get("enable_expert_parallel") else "")


def plan_sections(plan: dict[str, Any]) -> list[Section]:
    """The answer card, the ranked candidates with a cost chart, and the lever what-ifs; a
    hand-edited plan with a value of the wrong kind is one InputError, not a traceback."""
    try:
        return _sections(plan)
    except InputError:
        raise  # already one line saying what is wrong (the chart's own check)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise InputError(f"--plan: a value in the saved plan is not what kvplan plan --json "
                         f"writes ({exc!r}); save it again with kvplan plan --json") from None


def _sections(plan: dict[str, Any]) -> list[Section]:
    s, cands = plan["summary"], list(plan.get("candidates") or [])
    fleet = (f"{counted(s.get('replicas'), 'replica')}, {counted(s.get('gpus'), 'GPU')}"
             if s.get("replicas") is not None else "-")
    card = [("status", str(s.get("status"))), ("best", _text(s.get("best"))),
            ("$ / hour", _num(s.get("usd_per_hour"), 2)),
            ("$ / million output tokens", _num(s.get("usd_per_million_output_tokens"), 3)),
            ("replicas x GPUs", fleet), ("binds first", _text(s.get("binding"))),
            ("why", _text(s.get("one_line_why") or s.get("why"))),  # infeasible: why only
            *_band_rows(s)]
    rows = [(f"{c.get('id')} {c.get('gpu')} TP{c.get('tensor_parallel_size')}{_dp(c)} "
             f"{c.get('kv_cache_dtype')}", f"{c.get('stage')}: "
             f"{_num((c.get('cost') or {}).get('usd_per_hour'), 2)} $/h {c.get('reason') or ''}")
            for c in cands]
    inputs = plan.get("inputs") or {}
    # capacity_rps is load_per_replica: with a target rate, that rate / replicas (a load)
    per = "load per replica" if inputs.get("mode") == "target" else "capacity of one replica"
    levers = [(str(x.get("change")), f"{per} {_num(x.get('capacity_rps'), 2)} req/s "
               f"({_num(x.get('delta_capacity_pct'), 1)} %), {_num(x.get('usd_per_hour'), 2)} $/h")
              for x in plan.get("levers") or []]
    joint = _joint_section(_obj(plan.get("joint")))
    if joint and _obj(plan.get("joint")).get("winner_kind") == "disaggregated":
        card.insert(1, ("answer (--disagg)", f"{joint[0].rows[0][1]}; the card below is the "
                                             "best aggregated configuration"))
    return [
        Section(id="plan", title=f"Plan: {inputs.get('model')} for {inputs.get('workload')}",
                rows=tuple(card), charts=_pareto(plan), answer={"summary": s, "inputs": inputs},
                lines=tuple(x for x in (s.get("vllm_serve"), s.get("vllm_bench_serve")) if x)),
        *joint,
        Section(id="candidates", title="Candidates (stage reached, and why it stopped there)",
                rows=tuple(rows), charts=(_cost_chart(cands),) if _costed(cands) else (),
                answer={"candidates": cands}),
        Section(id="levers", title="Levers: one change to the best configuration",
                rows=tuple(levers), charts=(), answer={"levers": plan.get("levers") or []}),
    ]


def _joint_section(j: dict[str, Any]) -> list[Section]:
    """`plan --disagg`'s one ranking (the saved ``joint``), as `kvplan plan --disagg` prints it:
    which kind wins at what cost, the best disaggregated fleet, its what-ifs and serve lines."""
    if not j:
        return []
    win, dis = _obj(j.get("winner")), _obj(j.get("best_disaggregated"))
    rows = [("winner", f"{_text(j.get('winner_kind'))} {_text(win.get('id'))} "
                       f"{win.get('fleet') or ''} at {_num(win.get('usd_per_hour'), 2)} $/h"),
            ("versus", _text(j.get("versus")))]
    if dis:
        bind = _obj(dis.get("binding"))
        rows += [("best disaggregated", f"{dis.get('id')} {dis.get('fleet')} on "
                                        f"{counted(dis.get('gpus'), 'GPU')}, "
                                        f"{_num(dis.get('usd_per_hour'), 2)} $/h"),
                 ("binds", f"{bind.get('primary')}: {bind.get('why')}")]
        rows += [(f"what-if {_obj(r).get('change')}",
                  f"{_obj(r).get('fleet')} {_num(_obj(r).get('usd_per_hour'), 2)} $/h, "
                  f"{_term(_obj(r).get('binding_key'), _obj(r).get('binding_ms'))}, "
                  f"{'meets' if _obj(r).get('meets_slo') else 'misses'} the SLO")
                 for r in j.get("levers") or []]
    lines = [f"{role}: {line}" for role, line in _obj(dis.get("serve")).items()]
    kind = "disaggregation" if j.get("winner_kind") == "disaggregated" else "aggregation"
    return [Section(id="joint", title=f"Aggregated and disaggregated (plan --disagg): {kind} "
                    "wins", rows=tuple(rows), charts=(), answer={"joint": j},
                    lines=(*lines, f"pricing: {_text(j.get('price_note'))}"))]


def _obj(value: Any) -> dict[str, Any]:
    """A saved plan's object, or {} where the file holds something else there."""
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    """A card value; '-' where the plan has none (an infeasible plan has no best)."""
    return "-" if value is None else str(value)


def _band_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """One row per SLO term: predicted value, band (10-90 %), held at the pessimistic edge,
    each in the term's unit as `kvplan plan` prints it (812.4 ms, 12.35 s, 97.0 %)."""
    rows = [("SLO margin", str(s.get("slo_margin", "none"))),
            ("band basis (calibration residuals)", str(s.get("band_basis", "-")))]
    for c in s.get("slo_at_band_edge") or []:
        band = c.get("band")
        held = {True: "still met at the band's edge", False: "missed at the band's edge",
                None: "no residuals bound it"}[c.get("met_at_edge")]
        key = str(c.get("key"))
        shown = "-" if not band else f"{_in_unit(key, band[0])} - {_in_unit(key, band[1])}"
        limit = c.get("limit")
        head = f"{key} (limit {_in_unit(key, limit, limit_text)})"
        if c.get("sampled") is False:  # no request has a value of it (1-token outputs' TPOT)
            rows.append((head, "no sample"))
            continue
        rows.append((head, f"{_in_unit(key, c.get('value'))}, band (10-90%) {shown}: {held} "
                     f"[{c.get('band_basis')}]"))
    rows += [("note", str(n)) for n in s.get("calibration_notes") or []]
    return rows


def _term(key: Any, value: Any) -> str:
    """A what-if's binding term in its unit (a goodput share as a share, not ms)."""
    from kvplan.report.plan.plan_band_text import term_text

    return term_text(str(key), value if isinstance(value, int | float) else None)


def _in_unit(key: str, x: Any, text: Any = value_text) -> str:
    """An SLO term's figure as `kvplan plan` prints it (plan_band_text: value_text, or
    limit_text for its limit)."""
    return "-" if not isinstance(x, int | float) else str(text(key, x))


def _num(x: Any, digits: int) -> str:
    return "-" if not isinstance(x, int | float) else f"{x:,.{digits}f}"


def _pareto(plan: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The same Pareto chart as ``kvplan plan --plot`` and the web Plan page (none for a
    saved answer without candidates or SLO bounds to draw)."""
    from kvplan.report.plan.plan_chart import pareto_from_json

    try:
        slo = (plan.get("inputs") or {}).get("slo") or {}  # inputs may be absent or null
        if not (plan.get("candidates") and slo.get("bounds")):
            return ()
        spec: dict[str, Any] = pareto_from_json(plan).to_dict()
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise InputError(f"--plan: the saved plan's candidates cannot be charted ({exc!r}); "
                         "save it again with kvplan plan --json") from None
    return (spec,)


def _costed(cands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates that have a $/hour (none: all pruned before pricing, no chart)."""
    return [c for c in cands if isinstance((c.get("cost") or {}).get("usd_per_hour"), int | float)]


def _cost_chart(cands: list[dict[str, Any]]) -> dict[str, Any]:
    """$/hour of each candidate that has a cost, coloured by the stage it reached."""
    import altair as alt

    values = [{"id": c.get("id"), "usd_per_hour": c["cost"]["usd_per_hour"],
               "stage": c.get("stage"), "gpu": c.get("gpu")} for c in _costed(cands)]
    chart = alt.Chart(alt.Data(values=values)).mark_bar().encode(  # type: ignore[no-untyped-call]
        y=alt.Y("id:N", sort=None, title="candidate"), x=alt.X("usd_per_hour:Q", title="$ / hour"),
        color=alt.Color("stage:N"), tooltip=["id:N", "gpu:N", "stage:N", "usd_per_hour:Q"],
    ).properties(title="fleet cost per candidate", width=520)
    return chart_spec(chart)
