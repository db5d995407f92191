"""Fit one profile set to calibration points of many GPUs and models at once.

Shared by every GPU (they are properties of an engine's code path, not of the chip): the
fixed costs ``step_overhead_s``, ``prefill_overhead_s``, ``layer_overhead_s`` and
``request_overhead_s`` per engine, ``moe_layer_overhead_s`` and ``allreduce_latency_s`` by
all engines. Nothing is
fitted per GPU: kernels are priced from the GPU's measured tables (``kvplan.costs.kernels``),
and a GPU without tables takes the achieved rates of its nearest measured generation. The
loss is the mean over
points of the mean soft-L1 log error of each point's metrics (each point weighs the same),
minimised by a bounded coordinate search (a grid along each factor with a shrinking window).
No black box: every factor is a named physical term of the step cost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from statistics import median

from kvplan.analysis.calibration.public_set import CalPoint
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.profiles import ProfileSet

SHARED = ("moe_layer_overhead_s", "allreduce_latency_s")
PER_ENGINE = ("step_overhead_s", "prefill_overhead_s", "request_overhead_s", "layer_overhead_s",
              "api_request_s", "api_prompt_token_s", "api_admission_s")
"""Host-side costs (scheduler, input preparation, sampling) belong to the engine's code:
TensorRT-LLM's C++ runtime and SGLang pay other amounts than vLLM. So do the gaps between a
layer's kernels (``layer_overhead_s``): shared, it charged TensorRT-LLM's C++ runtime vLLM's
per-layer gaps (46 us, 1.5 ms on an 8B step); per engine, held out, dense TTFT 28.3 -> 23.7%,
MoE TPOT 18.8 -> 15.9% and offline max throughput 15.5 -> 12.5% (docs/formulas-latency.md,
"Sixth refit"). The bundled profile
carries vLLM's; the other engines' points still inform the GPU rates and kernel costs.
The API server's path (``api_*``) is fitted only for engines with served points (a static
batch - TensorRT-LLM's tables, ``vllm bench latency`` - has none); it is 0 elsewhere."""
API = ("api_request_s", "api_prompt_token_s", "api_admission_s")
FIXED = {"prefill_overhead_s": 0.0, "api_prompt_token_s": 0.0}
"""Held at a physical value, not fitted, for engines with served points. A step holding
prefill work pays its kernels (priced from the tables) and its requests' host work
(``request_overhead_s`` each); nothing more is left for a per-step constant to carry. Fitted
free (up to 10 ms) it took 8.2 ms for vLLM: API-path time, which a client's TTFT includes,
charged instead to every request sharing the step - and held out it did worse on dense TTFT
(35.5% against 21.6% at 0, docs/formulas-latency.md). The API path is ``api_*``. An engine
with static batches only (TensorRT-LLM's tables) has no API path: what its first step costs
beyond the kernels is its own and stays fitted.

``api_prompt_token_s`` (the API server's seconds per prompt token: tokenisation) is held at 0:
a Rust fast tokenizer takes well under a microsecond a token, 0.03-0.3 ms for the 200-1,000
token prompts of most runs. Fitted free, once Tenstorrent's prefix-cached TTFTs left the set
(``floor_check.same_method``), it went to its 20 us bound (5 us when bounded there): 0.64 s of
"tokenisation" for a 32,000-token prompt, standing in for the long-prompt prefill time the
step model misses (gpt-oss's attention-sink kernels on vLLM 0.10-0.11; docs/formulas-
latency.md). Held at 0, nothing pins."""
PER_GPU: tuple[str, ...] = ()
"""No per-GPU rate is fitted on serving data (issue 16): the silicon tables price kernels."""
REFERENCE_ENGINE = "vllm"
BOUNDS = {"bandwidth_eff": (0.05, 0.95), "compute_eff": (0.05, 0.95),
          "step_overhead_s": (0.0, 20e-3), "prefill_overhead_s": (0.0, 10e-3),
          "layer_overhead_s": (0.0, 200e-6), "moe_layer_overhead_s": (0.0, 1e-3),
          "allreduce_latency_s": (0.0, 200e-6), "request_overhead_s": (0.0, 500e-6),
          "api_request_s": (0.0, 100e-3), "api_prompt_token_s": (0.0, 20e-6),
          "api_admission_s": (0.0, 20e-3)}
"""prefill_overhead_s: not fitted for served engines (``FIXED``); unbounded, the fit once set
vLLM's to ~42 ms - the OpenAI server's per-request path (HTTP, chat template, tokenisation)
that the TTFTs measured by a client include - and charged it to every prefill chunk,
overpricing long prompts; that path is ``api_request_s`` + ``api_prompt_token_s`` per request.
api_request_s stops at 100 ms (a local HTTP request, chat template and hand-off to the engine
core take milliseconds to tens of milliseconds); api_prompt_token_s at 20 us per token (fast
tokenizers run at ~1 us/token); api_admission_s (the API server's one process per request,
serially) at 20 ms: a Python request handler with template and tokenisation takes ~1-10 ms
of one core."""
SOFT_L1_SCALE = 0.05
START = Profile(step_overhead_s=0.5e-3, prefill_overhead_s=4e-3, layer_overhead_s=10e-6,
                moe_layer_overhead_s=50e-6, allreduce_latency_s=10e-6, request_overhead_s=20e-6,
                api_request_s=10e-3, api_prompt_token_s=1e-6, api_admission_s=1e-3)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fit:
    """Fitted factors: shared fixed costs and each GPU's rates."""

    shared: dict[str, float]
    per_gpu: dict[str, dict[str, float]]
    per_engine: dict[str, dict[str, float]]

    def profile(self, gpu: str, precision: str = "*", engine: str = REFERENCE_ENGINE) -> Profile:
        """The profile of one GPU under one engine (a GPU the fit never saw gets the median
        rates; an engine it never saw gets vLLM's host costs)."""
        rates = self.per_gpu.get(gpu) or self.median_rates()
        host = self.per_engine.get(engine) or self.per_engine.get(REFERENCE_ENGINE) or {
            k: getattr(START, k) for k in PER_ENGINE}
        return Profile(gpu=gpu, precision=precision, **self.shared, **host, **rates)

    def median_rates(self) -> dict[str, float]:
        if not self.per_gpu:
            return {k: getattr(START, k) for k in PER_GPU}
        return {k: round(median(r[k] for r in self.per_gpu.values()), 4) for k in PER_GPU}


def point_loss(p: CalPoint, profile: Profile) -> float:
    """Mean soft-L1 of the log errors of one point's metrics."""
    pred = p.predict(profile)
    errs = [math.sqrt(1.0 + (math.log(pred[m] / v) / SOFT_L1_SCALE) ** 2) - 1.0
            for m, v in p.measured.items() if pred[m] > 0]
    return sum(errs) / len(errs) if errs else 0.0


def fit_loss(fit: Fit, points: Sequence[CalPoint]) -> float:
    return sum(point_loss(p, fit.profile(p.gpu, engine=p.engine))
               for p in points) / max(1, len(points))


def _start(points: Sequence[CalPoint]) -> Fit:
    gpus = sorted({p.gpu for p in points})
    engines = sorted({p.engine for p in points})
    served = {p.engine for p in points if p.served}
    return Fit(shared={k: getattr(START, k) for k in SHARED},
               per_gpu={g: {k: getattr(START, k) for k in PER_GPU} for g in gpus},
               per_engine={e: {k: FIXED[k] if k in FIXED and e in served else getattr(START, k)
                               if e in served or k not in API else 0.0
                               for k in PER_ENGINE} for e in engines})


def _with(fit: Fit, key: tuple[str, str], value: float) -> Fit:
    who, name = key
    if who == "*":
        return replace(fit, shared={**fit.shared, name: value})
    if who.startswith("engine:"):
        e = who.removeprefix("engine:")
        return replace(fit, per_engine={**fit.per_engine, e: {**fit.per_engine[e], name: value}})
    return replace(fit, per_gpu={**fit.per_gpu, who: {**fit.per_gpu[who], name: value}})


def _get(fit: Fit, key: tuple[str, str]) -> float:
    who, name = key
    if who == "*":
        return fit.shared[name]
    if who.startswith("engine:"):
        return fit.per_engine[who.removeprefix("engine:")][name]
    return fit.per_gpu[who][name]


def fit_points(points: Iterable[CalPoint], rounds: int = 10, grid: int = 9) -> Fit:
    """Fit the shared fixed costs and per-GPU rates to ``points``."""
    pts = list(points)
    fit = _start(pts)
    served = {p.engine for p in pts if p.served}
    keys = ([("*", k) for k in SHARED] + [(f"engine:{e}", k) for e in fit.per_engine
                                          for k in PER_ENGINE
                                          if (e in served and k not in FIXED)
                                          or (e not in served and k not in API)]
            + [(g, k) for g in fit.per_gpu for k in PER_GPU])
    width = {k: (BOUNDS[k[1]][1] - BOUNDS[k[1]][0]) / 2 for k in keys}
    losses = _Losses(pts, fit)
    for _ in range(rounds):
        for key in keys:
            fit = _line(losses, fit, key, width[key], grid)
        width = {k: w / 2.0 for k, w in width.items()}
    return _rounded(fit)


class _Losses:
    """Each point's loss under the current fit. A trial value of one factor re-prices only
    the points that factor reaches (a GPU's rates: that GPU's points; an engine's host costs:
    that engine's), and the total is summed in the same order as ``fit_loss``, so it equals
    ``fit_loss`` of the trial to the bit at a fraction of the cost."""

    def __init__(self, pts: Sequence[CalPoint], fit: Fit) -> None:
        self.pts = pts
        self.values = [point_loss(p, fit.profile(p.gpu, engine=p.engine)) for p in pts]
        self.best = sum(self.values) / max(1, len(pts))

    def reached(self, key: tuple[str, str]) -> list[int]:
        who = key[0]
        if who == "*":
            return list(range(len(self.pts)))
        if who.startswith("engine:"):
            e = who.removeprefix("engine:")
            return [i for i, p in enumerate(self.pts) if p.engine == e]
        return [i for i, p in enumerate(self.pts) if p.gpu == who]

    def trial(self, fit: Fit, idx: Sequence[int]) -> tuple[float, list[float]]:
        values = list(self.values)
        for i in idx:
            p = self.pts[i]
            values[i] = point_loss(p, fit.profile(p.gpu, engine=p.engine))
        return sum(values) / max(1, len(values)), values


def _line(losses: _Losses, fit: Fit, key: tuple[str, str], width: float, grid: int) -> Fit:
    lo, hi = BOUNDS[key[1]]
    centre = _get(fit, key)
    idx = losses.reached(key)
    for i in range(grid):
        value = min(hi, max(lo, centre + width * (2 * i / (grid - 1) - 1)))
        trial = _with(fit, key, value)
        trial_loss, values = losses.trial(trial, idx)
        if trial_loss < losses.best - 1e-12:
            fit, losses.best, losses.values = trial, trial_loss, values
    return fit


def _rounded(fit: Fit) -> Fit:
    def sig(d: dict[str, float]) -> dict[str, float]:
        return {k: float(f"{v:.4g}") for k, v in d.items()}

    return Fit(shared=sig(fit.shared),
               per_gpu={g: {k: round(v, 4) for k, v in r.items()} for g, r in fit.per_gpu.items()},
               per_engine={e: sig(r) for e, r in fit.per_engine.items()})


PIN_SPAN = 0.01
"""Within this share of a factor's range of a bound counts as on it: the line search's
shrinking grid stops a hair short (1.998 ms for a 2 ms bound), which is still the bound."""


def pinned(fit: Fit) -> list[str]:
    """Factors sitting on a bound (a fit compensating for something the model lacks)."""
    out = []
    groups = [("*", fit.shared), *fit.per_gpu.items(),
              *((f"engine {e}", r) for e, r in fit.per_engine.items())]
    for gpu, rates in groups:
        for name, v in rates.items():
            if name in FIXED and v == FIXED[name]:
                continue
            lo, hi = BOUNDS[name]
            near = PIN_SPAN * (hi - lo)
            if (lo > 0 and v <= lo + near) or v >= hi - near:
                out.append(f"{name}" + ("" if gpu == "*" else f" ({gpu})"))
    return out


def to_profile_set(fit: Fit, points: Sequence[CalPoint], fitted_on: str) -> ProfileSet:
    """One profile per (GPU, precision) seen in ``points``; the default carries the shared
    fixed costs with the median rates."""
    seen = sorted({(p.gpu, p.precision) for p in points})
    return ProfileSet(profiles=tuple(fit.profile(g, prec) for g, prec in seen),
                      default=fit.profile("*"), fitted_on=fitted_on)
