"""Hunt 18, the serving simulator's three loops against each other: the compiled core (where
built), the Python fast path (lean steps, fast-forwarded decode runs) and the step-by-step
reference must return the same SimulationResult, every field, on any workload: shared
prefixes and preemption on one full-attention group, sliding-window and state groups,
closed loops, long-prefill caps, chunked prefill off, step times that depend on the batch.

The reference model of vLLM (tests/vllm_v1_reference.py) pins the step trace at 1 s steps;
this pins the rest (arrival order inside batch-dependent steps, emission runs, the KV
series' running / waiting / logical bytes, claimed blocks, each request's hits).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.rejects import solo_peak_blocks
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload

_PATHS = (("core", True), ("python", True), ("python", False))


def _fields(r: object) -> dict[str, object]:
    """Every field of a result (the step series' columns one by one), emission runs sorted."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(r):  # type: ignore[arg-type]
        v = getattr(r, f.name)
        if dataclasses.is_dataclass(v):
            for g in dataclasses.fields(v):
                out[f"{f.name}.{g.name}"] = np.asarray(getattr(v, g.name)).tolist()
        else:
            out[f.name] = v.tolist() if isinstance(v, np.ndarray) else v
    out["runs"] = sorted(zip(out.pop("seg_req"), out.pop("seg_first"), out.pop("seg_last"),
                             strict=True))
    return out


def _same(a: object, b: object) -> bool:
    if a == b:
        return True
    try:  # NaN timestamps (rejected or unfinished requests) equal each other
        return bool(np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                                   equal_nan=True))
    except (TypeError, ValueError):
        return False


def _all_paths_agree(run) -> None:
    had = os.environ.get("KVPLAN_SIM_CORE")
    results = []
    try:
        for path, fast in _PATHS:
            os.environ["KVPLAN_SIM_CORE"] = "python" if path == "python" else ""
            results.append(_fields(run(fast)))
    finally:
        if had is None:
            os.environ.pop("KVPLAN_SIM_CORE", None)
        else:
            os.environ["KVPLAN_SIM_CORE"] = had
    first = results[0]
    for (path, fast), other in zip(_PATHS[1:], results[1:], strict=True):
        for key, value in first.items():
            assert _same(value, other[key]), (path, fast, key, value, other[key])


@st.composite
def _timer(draw) -> LinearTimer:
    if draw(st.booleans()):
        return LinearTimer(base_s=1.0)
    return LinearTimer(base_s=1.0, per_token_s=draw(st.sampled_from([0.003, 0.013, 0.1])),
                       per_context_s=draw(st.sampled_from([0.0, 0.0007, 0.01])))


@st.composite
def _common(draw, n_max: int = 30):
    n = draw(st.integers(1, n_max))
    prompts = draw(st.lists(st.integers(1, draw(st.sampled_from([6, 30, 70]))),
                            min_size=n, max_size=n))
    outputs = draw(st.lists(st.integers(1, draw(st.sampled_from([3, 20, 50]))),
                            min_size=n, max_size=n))
    chunked = draw(st.booleans()) or draw(st.booleans())
    budget = draw(st.integers(1, 64))
    if not chunked:
        budget = max([budget] + [p + o for p, o in zip(prompts, outputs, strict=True)])
    lim = Limits(max_num_batched_tokens=budget, max_num_seqs=draw(st.integers(1, n + 1)),
                 chunked_prefill=chunked, prefix_caching=draw(st.booleans()),
                 long_prefill_token_threshold=draw(st.sampled_from([0, 0, 1, 4, 9]))
                 if chunked else 0)
    arrivals = sorted(draw(st.lists(st.sampled_from([0, 0, 0.5, 1, 2.25, 4, 9, 20]),
                                    min_size=n, max_size=n)))
    conc = draw(st.none() | st.integers(1, n))
    return n, prompts, outputs, lim, arrivals, conc


@settings(max_examples=120, deadline=None)
@given(_common(), _timer(), st.sampled_from([1, 2, 4, 16]), st.data())
def test_shared_prefix_runs_agree_on_every_field(common, timer, b, data):
    n, prompts, outputs, lim, arrivals, conc = common
    lead = {g: data.draw(st.integers(1, 5)) * b for g in (0, 1)}
    groups = data.draw(st.lists(st.sampled_from([None, 0, 1]), min_size=n, max_size=n))
    hashes = [[1000 * g + j for j in range(min(lead[g], p) // b)] if g is not None else []
              for g, p in zip(groups, prompts, strict=True)]
    w = workload(arrivals, prompts, outputs, concurrency=conc, hashes=hashes, hash_tokens=b)
    peak = max(-(-(p + o - 1) // b) for p, o in zip(prompts, outputs, strict=True))
    blocks = peak + 1 + data.draw(st.integers(0, 4 * n))
    _all_paths_agree(lambda fast: simulate(w, timer=timer, num_blocks=blocks, block_size=b,
                                           limits=lim, fast=fast))


@settings(max_examples=80, deadline=None)
@given(_common(), _timer(), st.sampled_from([1, 2, 4, 16]), st.data())
def test_window_and_state_runs_agree_on_every_field(common, timer, b, data):
    n, prompts, outputs, lim, arrivals, conc = common
    groups = [CacheGroup(kind="sliding", window=data.draw(st.sampled_from([2, 3, 5, 8, 32])),
                         weight=data.draw(st.integers(1, 3)))]
    if data.draw(st.booleans()):
        groups.insert(0, CacheGroup(kind="full", weight=data.draw(st.integers(1, 2))))
    if data.draw(st.booleans()):
        groups.append(CacheGroup(kind="sliding", window=data.draw(st.sampled_from([4, 7]))))
    if data.draw(st.booleans()):
        groups.append(CacheGroup(kind="state"))
    shape = KvShape(block_size=b, groups=tuple(groups))
    total = np.array(prompts) + np.array(outputs)
    peak = int(solo_peak_blocks(np.array(prompts), total, shape, lim).max())
    blocks = peak + 1 + data.draw(st.integers(0, 4 * n))
    w = workload(arrivals, prompts, outputs, concurrency=conc)
    _all_paths_agree(lambda fast: simulate(w, timer=timer, num_blocks=blocks, block_size=b,
                                           kv=shape, limits=lim, fast=fast))


def test_a_models_state_layers_take_vllms_block_per_group_in_simulate():
    # simulate(kv=ModelKv): vLLM 0.11 (_get_kv_cache_groups_uniform_page_size) cuts every
    # spec's layers, Mamba / linear-attention state layers included, into groups of the
    # smallest spec's layer count, and each group takes its own pool blocks. Qwen3-Next-80B:
    # 36 state + 12 full-attention layers -> groups of 12: 1 full + 3 state groups. One
    # request, prompt 100, output 1, B = 16: cdiv(100, 16) = 7 full blocks + 3 state blocks
    # = 10 (ModelKv.blocks_for says so too). Before: the state layers were one group, 8.
    # Nemotron-H-56B: 54 state + 10 full -> groups of 10: 7 + cdiv(54, 10) = 7 + 6 = 13.
    from kvplan import kv_spec, load_model

    for model, blocks in (("Qwen/Qwen3-Next-80B-A3B-Thinking", 10),
                          ("nvidia/Nemotron-H-56B-Base-8K", 13)):
        kv = kv_spec(load_model(model))
        assert kv.blocks_for(100, 16, 0) == blocks
        r = simulate(workload([0], [100], [1]), timer=LinearTimer(base_s=1.0),
                     num_blocks=100, block_size=16, kv=kv,
                     limits=Limits(max_num_batched_tokens=1000, max_num_seqs=4))
        assert r.steps.used_blocks.tolist() == [blocks], model
