"""Ranking the candidates, the commands for the winner, and why nothing was feasible."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

import numpy as np

from kvplan.analysis.plan.funnel import Limits
from kvplan.analysis.plan.records import Candidate
from kvplan.analysis.plan.traffic import PlanTraffic
from kvplan.costs.memory.settings import mla_block_size
from kvplan.specs.deployment import vllm_serve_argv, vllm_serve_env
from kvplan.specs.slo import GOODPUT_METRICS, Slo
from kvplan.units import counted, pct_text


def rank(cands: list[Candidate], lim: Limits) -> list[Candidate]:
    """Verified candidates, cheapest first (target: $/hour; capacity: $/M output tokens).

    Ties: larger SLO margin, then fewer GPUs, then candidate id.
    """
    ok = [c for c in cands if c.stage == "verified"]
    if lim.rate_rps is None:
        return sorted(ok, key=lambda c: (c.usd_per_million_output_tokens or 0.0, c.id))
    return sorted(ok, key=lambda c: (c.usd_per_hour or 0.0, -_margin(c),
                                     (c.replicas or 0) * c.deployment.gpus_per_replica, c.id))


def _margin(c: Candidate) -> float:
    return min((m for _, m in c.fleet.margins), default=0.0) if c.fleet else 0.0


def closest_miss(c: Candidate) -> tuple[str, float, float | None]:
    """(SLO term, relative miss, achieved) of the candidate's nearest failing check: its
    verified fleet's when it has one (a fleet that met the SLO misses nothing, though a
    budget may rule it out), else the capacity search's failing probe, else zero load."""
    if c.fleet is not None:
        margins, achieved = c.fleet.margins, dict(c.fleet.achieved)
    elif c.capacity is not None and c.capacity.margins_at_hi:
        margins, achieved = c.capacity.margins_at_hi, dict(c.capacity.achieved_at_hi)
    else:
        margins, achieved = c.zero_load_margins, {}
    key, m = min(margins, key=lambda kv: kv[1]) if margins else ("slo", -np.inf)
    return key, float(m), achieved.get(key)


BUDGET_FLAGS = ("--max-gpus", "--max-cost-per-hour")


def closest(cands: list[Candidate] | tuple[Candidate, ...]
            ) -> list[tuple[tuple[str, float, float | None], Candidate]]:
    """The candidates that miss an SLO term, nearest miss first (ties: candidate id)."""
    fits = [c for c in cands if c.stage not in ("invalid", "pruned_memory", "duplicate")]
    misses = [(cm, c) for c in fits if (cm := closest_miss(c))[1] < 0]
    return sorted(misses, key=lambda s: (-s[0][1], s[1].id))


def refused_whole(cands: list[Candidate] | tuple[Candidate, ...]) -> str | None:
    """When vLLM (or kvplan's own limits, ``refusers``) refuses every configuration of the
    space (the user's own flags, before any SLO is judged: bad input), one sentence naming
    its refusals; else None."""
    judged = [c for c in cands if c.stage != "duplicate"]
    if not judged or any(c.stage != "invalid" for c in judged):
        return None
    reasons = list(dict.fromkeys(c.reason for c in judged))
    more = f"; and {len(reasons) - 3} other refusals" if len(reasons) > 3 else ""
    return f"{refusers(reasons)} ({'; '.join(reasons[:3])}{more}); change the flag it names"


def refusers(reasons: Iterable[str]) -> str:
    """Who refuses the space: vLLM, unless a reason names kvplan's own limit (a link or
    kernel it does not know: vLLM would run TP 16 over two L40S nodes, kvplan cannot price
    it)."""
    ours = [("kvplan" in r) for r in reasons]
    if ours and all(ours):
        return "kvplan cannot model any configuration in the space"
    return (("vLLM refuses or kvplan cannot model" if any(ours) else "vLLM refuses")
            + " every configuration in the space")


def infeasible_why(cands: list[Candidate], lim: Limits, max_gpus: int | None,
                   outside: dict[str, str] | None = None, advice: str = "") -> str:
    """One sentence: what the closest candidates miss, by how much, and the lever needed
    (``advice``: the what-if that moves the missed term most, plan_advice)."""
    fits = [c for c in cands if c.stage not in ("invalid", "pruned_memory", "duplicate")]
    if not fits:  # a duplicate was never judged: its reason names its twin, not a limit
        first = next((c for c in cands if c.stage == "pruned_memory"), None)
        if first is None:
            refused = next((c for c in cands if c.stage == "invalid"), cands[0])
            return (f"{refusers([refused.reason])} ({refused.reason}); "
                    "change the flag it names")
        return _memory_text(first.reason)
    budget = [c for c in fits if any(f in c.reason for f in BUDGET_FLAGS)]
    met = sorted((c for c in budget if c.fleet is not None and c.fleet.ok),
                 key=lambda c: (c.usd_per_hour or 0.0, c.id))
    if met:
        return _met_text(met[0], budget)
    misses = closest(cands)
    if not misses and budget:
        return _budget_text(budget, max_gpus)
    if not misses:
        return f"nothing in the space can be priced or served: {fits[0].reason}"
    (key, m, got), best = misses[0]
    d = best.deployment
    miss = f"by {abs(m):.3f}" if key == "goodput_share" else f"by {pct_text(100 * abs(m))} %"
    seen = f" ({ms_text(got)} ms)" if got is not None and key != "goodput_share" else ""
    also = _ruled_out(budget)
    lever = advice or _lever_for(key)
    e = d.engine
    dp = (f" DP {e.data_parallel_size}" if e.data_parallel_size > 1 else "") + (
        " EP" if e.enable_expert_parallel else "")
    return (f"nothing in the space meets the SLO{also}; the closest, {best.id} ({d.gpu.id} TP "
            f"{e.tensor_parallel_size}{dp}, kv {e.kv_cache_dtype}, chunk "
            f"{d.engine.max_num_batched_tokens}), misses {key} {miss}{seen}{_where(best)}"
            f"{_api_note(best)}: {lever}{'' if advice else _outside_text(key, outside or {})}")


def _ruled_out(budget: list[Candidate]) -> str:
    """' (2 others were ruled out by --max-gpus)': how many, by the flags that did."""
    if not budget:
        return ""
    flags = [f for f in BUDGET_FLAGS if any(f in c.reason for c in budget)]
    verb = "was" if len(budget) == 1 else "were"
    return f" ({counted(len(budget), 'other')} {verb} ruled out by {' and '.join(flags)})"


def _memory_text(reason: str) -> str:
    """Nothing fits: the first miss, and the levers its memory check computed to fit
    (costs.memory.plan._levers: '; fits with ...' or '; no combination ... fits')."""
    head, _, levers = reason.partition(";")
    levers = levers.strip()
    if not levers:
        levers = ("add a larger --tensor-parallel-size, --kv-cache-dtype fp8, --quantization "
                  "fp8 or a GPU with more memory")
    return f"no configuration in the space fits in memory ({head}); {levers}"


def ms_text(v: float) -> str:
    """A latency at a precision that keeps a miss visible (22.4 over a 22 ms limit read
    '22' before, as if it met it): one decimal below 100 ms."""
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def _api_note(c: Candidate) -> str:
    """The zero-load reason's API-path part (funnel._api_part), where it names one."""
    at = c.reason.find(" (", c.reason.find("over the SLO"))
    return c.reason[at:] if "the API server's path" in c.reason and at >= 0 else ""


def _where(c: Candidate) -> str:
    """' with 16 replicas' where the miss was judged on a fleet."""
    if c.fleet is not None:
        return f" with {counted(c.fleet.replicas, 'replica')}"
    cap = c.capacity
    if cap and cap.replicas_failing:
        return f" with {counted(cap.replicas_failing, 'replica')}"
    return ""


def _outside_text(key: str, outside: dict[str, str]) -> str:
    """Concrete values outside the space for the lever the missed term needs."""
    wanted = ("tp", "gpu") if "ttft" in key else ("tp", "gpu", "quantization")
    picks = [outside[k] for k in wanted if k in outside]
    return f"; try {' or '.join(picks)}" if picks else ""


def _met_text(c: Candidate, budget: list[Candidate]) -> str:
    """The SLO is met, but only by fleets a budget flag rules out: the cheapest of them (the
    cheapest verified, and the cheaper bound of one never simulated, where there is one)."""
    e = c.deployment.engine
    flag = next(f for f in BUDGET_FLAGS if f in c.reason)
    low = _cheapest_bound(b for b in budget if b.fleet is None and b.capacity is None)
    below = low is not None and (low.optimistic_usd_per_hour or 0.0) < (c.usd_per_hour or 0.0)
    text = (f"every fleet that meets the SLO breaks the budget: the cheapest"
            f"{' verified' if below else ''}, {c.id} ({c.deployment.gpu.id} TP "
            f"{e.tensor_parallel_size}, {counted(c.replicas, 'replica')}), "
            f"{c.reason.removeprefix('its verified fleet ')}")
    if below and low is not None:
        text += (f"; {_named(low)} was not simulated and may cost as little as "
                 f"${low.optimistic_usd_per_hour or 0.0:.2f}/h")
    return f"{text}; raise {flag}"


def _cheapest_bound(cands: Iterable[Candidate]) -> Candidate | None:
    """The candidate with the lowest optimistic fleet cost (ties: id)."""
    priced = [c for c in cands if c.optimistic_usd_per_hour is not None]
    return min(priced, key=lambda c: (c.optimistic_usd_per_hour or 0.0, c.id), default=None)


def _named(c: Candidate) -> str:
    return f"{c.id} ({c.deployment.gpu.id} TP {c.deployment.engine.tensor_parallel_size})"


def _budget_text(budget: list[Candidate], max_gpus: int | None) -> str:
    gpus = [int(c.reason.split("= ")[1].split()[0]) for c in budget
            if "--max-gpus" in c.reason and "= " in c.reason]
    if max_gpus is not None and gpus:
        return (f"--max-gpus {max_gpus} is below any feasible fleet: the smallest that "
                f"passes the memory and zero-load checks needs at least {min(gpus)} GPUs "
                "(not simulated); raise --max-gpus")
    low = _cheapest_bound(c for c in budget if "--max-cost-per-hour" in c.reason)
    if low is None:
        return f"every fleet breaks the budget: {budget[0].reason}; raise --max-cost-per-hour"
    return (f"every fleet breaks the budget: the cheapest, {_named(low)}, {low.reason}; "
            "raise --max-cost-per-hour")


def _lever_for(key: str) -> str:
    if "ttft" in key:
        return ("more prefill compute per replica is needed: a larger --tensor-parallel-size "
                "or a faster GPU than the space holds, or a looser TTFT bound")
    if "tpot" in key or "itl" in key:
        return ("more memory bandwidth per replica is needed: a larger --tensor-parallel-size, "
                "--quantization fp8 or a GPU with faster HBM than the space holds")
    return ("faster replicas are needed: a larger --tensor-parallel-size or a faster GPU than "
            "the space holds, or a looser SLO")


def serve_and_bench(w: Candidate, traffic: PlanTraffic, slo: Slo,
                    model_id: str | None = None) -> tuple[str, str]:
    """The winner's exact `vllm serve` line and a `vllm bench serve` line to confirm it, both
    naming ``model_id`` (the id the user gave) and the block size vLLM will use; a DP group
    of an MoE model runs under the exchange kvplan priced (``VLLM_ALL2ALL_BACKEND=...``)."""
    d = w.deployment
    model_id = model_id or d.model.name
    block = mla_block_size(d.model, d.gpu, d.engine.block_size)
    serve = shlex.join([*vllm_serve_env(d), *vllm_serve_argv(d, model_id, block_size=block)])
    good = dict(slo.goodput_ms) or {b.metric: b.limit_ms for b in slo.bounds
                                    if b.metric in GOODPUT_METRICS}
    rate = traffic.given_rate_rps or traffic.rate_rps or (
        w.capacity.rate_rps if w.capacity else 1.0)
    argv = ["vllm", "bench", "serve", "--model", model_id, *bench_dataset(traffic),
            "--num-prompts", str(traffic.requests), "--request-rate", flag_number(rate)
            if traffic.given_rate_rps else f"{rate:g}"]
    if traffic.given_rate_rps and traffic.burstiness != 1.0:  # drawn: the shape as given
        argv += ["--burstiness", flag_number(traffic.burstiness)]
    elif traffic.rate_rps is not None and f"{traffic.burstiness:.2g}" != "1":  # a trace's fit
        argv += ["--burstiness", f"{traffic.burstiness:.2g}"]
    # every request generates its whole output, as kvplan simulated (else EOS cuts it short)
    pcts = sorted({50.0, 90.0, 99.0, *(b.percentile for b in slo.bounds)})
    argv += ["--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
             "--metric-percentiles", ",".join(f"{p:g}" for p in pcts)]
    if good:
        argv += ["--goodput", *(f"{k}:{v:g}" for k, v in good.items())]
    return serve, shlex.join(argv)


SHAREGPT_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"


def bench_dataset(traffic: PlanTraffic) -> list[str]:
    """`vllm bench serve`'s dataset flags for the plan's requests: the same ones where vLLM
    draws them as kvplan does (``random`` with its lengths, range, prefix and seed;
    ``sharegpt``'s file at vLLM's default --seed 0, whose requests kvplan bundles: another
    seed shuffles other conversations in, ``seed_warning``), else random prompts of the
    workload's median lengths (``replayable`` is False: the plan warns)."""
    a = traffic.args
    if a is not None and a.trace is None and a.dataset == "sharegpt":
        return ["--dataset-name", "sharegpt", "--dataset-path", SHAREGPT_FILE]
    if a is not None and a.trace is None and a.dataset in (None, "random"):
        out = ["--dataset-name", "random", "--random-input-len", str(a.random_input_len),
               "--random-output-len", str(a.random_output_len)]
        for flag, value, default in (("--random-range-ratio", a.random_range_ratio, 0.0),
                                     ("--random-prefix-len", a.random_prefix_len, 0),
                                     ("--seed", a.seed, 0)):
            out += [flag, flag_number(value)] if value != default else []
        return out
    unit = traffic.unit
    return ["--dataset-name", "random",
            "--random-input-len", str(int(np.median(unit.prompt_tokens))),
            "--random-output-len", str(int(np.median(unit.output_tokens)))]


def seed_warning(traffic: PlanTraffic) -> tuple[str, ...]:
    """sharegpt at --seed N != 0: vLLM's one --seed shuffles the conversations and draws the
    send times, so the Verify line (seed 0, the judged conversations) sends them at other
    times than kvplan drew (at --request-rate, or in capacity mode at the rate found)."""
    a = traffic.args
    if a is None or a.trace is not None or a.dataset != "sharegpt" or a.seed == 0:
        return ()
    return (f"Verify sends the sharegpt conversations kvplan judged (vllm bench serve's --seed "
            f"0 sample) at the send times vllm bench serve draws with that seed; kvplan drew "
            f"them with --seed {a.seed} (vLLM's one --seed picks both the conversations and "
            "the times)",)


def flag_number(x: float) -> str:
    """A flag's value as vLLM must read it to draw what kvplan drew: a whole number in full
    (``%g`` wrote seed 1234567 as 1.23457e+06, which an int flag refuses), a float by %g
    where that is exact, else every digit (0.3333333, not 0.333333)."""
    if isinstance(x, int):
        return str(x)
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


def replayable(traffic: PlanTraffic) -> bool:
    """Whether the Verify line sends the plan's own requests (``bench_dataset``)."""
    a = traffic.args
    return a is not None and a.trace is None and a.dataset in (None, "random", "sharegpt")
