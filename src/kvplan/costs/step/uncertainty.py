"""Error bands: how far a latency answer may be off, from the calibration residuals.

The bundled profile (``data/profiles/default.json``) stores, per metric, the spread of
measured / predicted over the calibration points, held out by source (leave-one-source-out:
each point predicted by a fit that never saw its source), grouped by family (dense / MoE),
GPU and TP degree. ``band_for`` picks the nearest group with enough points and scales a
prediction by its 10th and 90th percentile ratios; ``coverage_notes`` says in words when the
model, GPU or TP lies outside what the profile was fitted on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

MIN_POINTS = 4
"""A group needs this many held-out residuals to give its own band."""
METRIC_OF = {"ttft_s": "ttft_s", "tpot_s": "tpot_s", "itl_s": "tpot_s", "e2e_s": "e2e_s",
             "output_throughput_tok_s": "output_throughput_tok_s"}
"""Answer key -> the calibration metric whose residuals bound it (ITL ~ TPOT)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BandGroup:
    """Held-out spread of measured / predicted for one (family, GPU, TP, metric) group;
    ``gpu`` / ``tp`` = ``*`` for the wider groups."""

    family: str
    gpu: str
    tp: str
    metric: str
    n: int
    low_ratio: float
    high_ratio: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """A value's band: [low, high] in the value's unit, and what it was derived from."""

    low: float
    high: float
    basis: str
    """Which calibration group gave it, e.g. 'moe on H100-SXM-80GB at TP8, 9 held-out points'."""

    def as_list(self) -> list[float]:
        return [self.low, self.high]


@dataclass(frozen=True, slots=True, kw_only=True)
class Coverage:
    """What the bundled profile was fitted on."""

    gpus: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tp: tuple[int, ...] = ()
    families: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Uncertainty:
    groups: tuple[BandGroup, ...]
    coverage: Coverage


def uncertainty_from_dict(data: Mapping[str, Any]) -> Uncertainty:
    """The ``bands`` and ``coverage`` entries of a profile JSON (absent -> empty)."""
    groups = tuple(BandGroup(**g) for g in data.get("bands") or [])
    c = data.get("coverage") or {}
    return Uncertainty(groups=groups, coverage=Coverage(
        gpus=tuple(c.get("gpus", ())), models=tuple(c.get("models", ())),
        tp=tuple(int(t) for t in c.get("tp", ())), families=tuple(c.get("families", ()))))


@cache
def bundled_uncertainty() -> Uncertainty:
    """Bands and coverage of the bundled profile."""
    from kvplan import input_file, jsonread

    text = input_file.read_text(input_file.package_file("data", "profiles", "default.json"))
    return uncertainty_from_dict(jsonread.loads(text))


def family_of(model: Any) -> str:
    """'moe' for a mixture-of-experts model, else 'dense'."""
    return "moe" if getattr(model, "moe", None) is not None else "dense"


def _twin(gpu: str) -> str:
    """The measured GPU a catalog GPU is priced as (``kernels_of``: H800 -> H100 SXM), else
    ``gpu``."""
    from kvplan.specs.hardware import gpu_catalog

    spec = gpu_catalog().get(gpu.lower())
    return spec.kernels_of if spec is not None and spec.kernels_of else gpu


def _nearest(u: Uncertainty, family: str, gpu: str, tp: int, metric: str) -> BandGroup | None:
    gpu = _twin(gpu)
    tries = ((family, gpu, str(tp)), (family, gpu, "*"), (family, "*", "*"), ("*", "*", "*"))
    groups = _by_key(u)
    for fam, g, t in tries:
        grp = groups.get((fam, g, t, metric))
        if grp is not None:
            return grp
    return None


_INDEX: dict[int, tuple[Uncertainty, dict[tuple[str, str, str, str], BandGroup]]] = {}
"""Per Uncertainty (by identity, the object held so its id stays its own): the first group
with MIN_POINTS residuals per (family, GPU, TP, metric); a planner asks thousands of times."""


def _by_key(u: Uncertainty) -> dict[tuple[str, str, str, str], BandGroup]:
    held = _INDEX.get(id(u))
    if held is None or held[0] is not u:
        index: dict[tuple[str, str, str, str], BandGroup] = {}
        for grp in u.groups:
            if grp.n >= MIN_POINTS:
                index.setdefault((grp.family, grp.gpu, grp.tp, grp.metric), grp)
        if len(_INDEX) >= 64:
            _INDEX.clear()
        held = _INDEX[id(u)] = (u, index)
    return held[1]


def band_for(value: float, key: str, *, family: str, gpu: str, tp: int,
             uncertainty: Uncertainty | None = None) -> Band | None:
    """The band of ``value`` (an answer under ``key``, e.g. ``tpot_s``), or None when the
    profile holds no residuals for that metric."""
    u = uncertainty or bundled_uncertainty()
    metric = METRIC_OF.get(key)
    grp = None if metric is None else _nearest(u, family, gpu, tp, metric)
    if grp is None:
        return None
    where = "all families" if grp.family == "*" else grp.family
    if grp.gpu != "*":
        where += f" on {grp.gpu}"
    if grp.tp != "*":
        where += f" at TP{grp.tp}"
    return Band(low=value * grp.low_ratio, high=value * grp.high_ratio,
                basis=f"{where}, {grp.n} held-out points")


def coverage_notes(*, model_id: str, gpu: str, tp: int, family: str,
                   uncertainty: Uncertainty | None = None) -> list[str]:
    """Plain sentences for each way this deployment lies outside the fitted data."""
    c = (uncertainty or bundled_uncertainty()).coverage
    notes = []
    twin = _twin(gpu)
    if c.gpus and gpu not in c.gpus and twin in c.gpus:
        notes.append(f"{gpu} is not in the calibration set: it is priced as {twin} (the same "
                     f"die and kernels, its own interconnect), with {twin}'s band")
    elif c.gpus and gpu not in c.gpus:
        notes.append(f"{gpu} is not in the calibration set (fitted on {', '.join(c.gpus)}): "
                     "its rates are the median of the fitted GPUs' and the band may not hold")
    if c.models and model_id not in c.models:
        notes.append(f"{model_id} was not measured; its band comes from other {family} models")
    if c.tp and not min(c.tp) <= tp <= max(c.tp):
        notes.append(f"TP{tp} lies outside the fitted TP{min(c.tp)}-{max(c.tp)}")
    if c.families and family not in c.families:
        notes.append(f"no {family} model was in the calibration set")
    return notes


def answer_bands(values: Mapping[str, float | None], *, family: str, gpu: str, tp: int,
                 key_of: Mapping[str, str] | None = None,
                 uncertainty: Uncertainty | None = None) -> dict[str, list[float] | None]:
    """``{name}_band: [low, high]`` for each answer in ``values`` (None where the value is
    None or no residuals bound it). ``key_of`` maps an answer's name to its metric key
    (``mean_tpot_ms`` -> ``tpot_s``); the band keeps the answer's own unit."""
    out: dict[str, list[float] | None] = {}
    for name, value in values.items():
        key = (key_of or {}).get(name, name)
        band = None if value is None else band_for(value, key, family=family, gpu=gpu, tp=tp,
                                                   uncertainty=uncertainty)
        out[f"{name}_band"] = None if band is None else band.as_list()
    return _e2e_not_below_ttft(out)


E2E_OVER_TTFT = (("ttft_s", "e2e_s"), ("mean_ttft_ms", "mean_e2el_ms"),
                 ("median_ttft_ms", "median_e2el_ms"))
"""Answers where the second is never below the first: every request's end-to-end latency
holds its TTFT, so their means and their medians (order statistics) do too."""


def _e2e_not_below_ttft(out: dict[str, list[float] | None]) -> dict[str, list[float] | None]:
    """Each band is its metric's own held-out residual ratios, so an end-to-end band could
    reach below the TTFT band of the same answer (one output token: TTFT 10.8-18.6 ms, E2E
    6.7-15.4 ms). Lift each end of the end-to-end band to at least the TTFT band's."""
    for ttft, e2e in E2E_OVER_TTFT:
        t, e = out.get(f"{ttft}_band"), out.get(f"{e2e}_band")
        if t is not None and e is not None:
            out[f"{e2e}_band"] = [max(e[0], t[0]), max(e[1], t[1])]
    return out


def band_basis(*, family: str, gpu: str, tp: int, metric: str = "tpot_s",
               uncertainty: Uncertainty | None = None) -> str:
    """Which calibration group bounds this deployment's answers, in words."""
    band = band_for(1.0, metric, family=family, gpu=gpu, tp=tp, uncertainty=uncertainty)
    return "no calibration residuals" if band is None else band.basis


METRIC_WORDS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "itl_s": "ITL", "e2e_s": "end-to-end",
                "output_throughput_tok_s": "output throughput"}


def answer_basis(keys: list[str], *, family: str, gpu: str, tp: int) -> str:
    """The calibration group of each metric in ``keys`` (answer keys: ``METRIC_WORDS``): one
    group in words where all share it, else the metrics of each group. A metric falls back on
    a wider group alone where its own has too few points, so one answer's TTFT, TPOT and
    end-to-end bands can come from different groups."""
    words: dict[str, list[str]] = {}
    for key in dict.fromkeys(k for k in keys if k in METRIC_WORDS):
        basis = band_basis(family=family, gpu=gpu, tp=tp, metric=key)
        words.setdefault(basis, []).append(METRIC_WORDS[key])
    if len(words) <= 1:
        return next(iter(words), band_basis(family=family, gpu=gpu, tp=tp))
    return "; ".join(f"{' and '.join(w)}: {basis}" for basis, w in words.items())


SIM_KEYS = {"mean_ttft_ms": "ttft_s", "median_ttft_ms": "ttft_s", "mean_tpot_ms": "tpot_s",
            "median_tpot_ms": "tpot_s", "mean_itl_ms": "itl_s", "median_itl_ms": "itl_s",
            "mean_e2el_ms": "e2e_s", "median_e2el_ms": "e2e_s",
            "output_throughput": "output_throughput_tok_s"}
"""Simulate answers (vllm bench serve names) -> the calibration metric bounding them."""


def deployment_bands(model: Any, gpu: str, tp: int, values: Mapping[str, float | None],
                     key_of: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything an answer adds for its uncertainty: ``{name}_band`` per value,
    ``band_basis`` (which calibration group) and ``calibration_notes`` (outside the data).
    ``model`` is a ModelSpec (its ``name`` and MoE-ness are used)."""
    family = family_of(model)
    out: dict[str, Any] = answer_bands(values, family=family, gpu=gpu, tp=tp, key_of=key_of)
    metrics = [(key_of or {}).get(name, name) for name in values]
    out["band_basis"] = answer_basis(metrics, family=family, gpu=gpu, tp=tp)
    out["calibration_notes"] = coverage_notes(model_id=getattr(model, "name", str(model)),
                                              gpu=gpu, tp=tp, family=family)
    return out


Deployment = tuple[Any, str, int]
"""(ModelSpec, GPU id, tensor-parallel degree): what a band is looked up for."""


def latency_bands(deployment: Deployment, r: Any) -> dict[str, Any]:
    """``*_band`` keys, band basis and notes of one static-batch answer (a LatencyResult)."""
    spec, gpu, tp = deployment
    return deployment_bands(spec, gpu, tp, {
        "ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s,
        "output_throughput_tok_s": r.output_throughput_tok_s})


def sweep_row_bands(deployment: Deployment, lever: str, value: str, r: Any) -> dict[str, Any]:
    """``*_band`` keys of one sweep row (a TP sweep takes the row's own degree)."""
    spec, gpu, tp = deployment
    row_tp = int(value) if lever == "tensor-parallel-size" else tp
    return answer_bands({"ttft_s": r.ttft_s, "tpot_s": r.tpot_s, "e2e_s": r.e2e_s,
                         "output_throughput_tok_s": r.output_throughput_tok_s},
                        family=family_of(spec), gpu=gpu, tp=row_tp)
