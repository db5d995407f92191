"""Request lengths of a public random-dataset run as its benchmark drew them.

A closed-loop run (``--max-concurrency C``) replayed with every request at one length keeps
its C clients in step: they start together, finish together and send their next requests
together, so every round is a burst of C prompts queued behind one another at the API server
and the scheduler. A real run drifts out of step as soon as lengths differ. Two cases are
known from the published commands (``workload`` keys of ``public_calibration.json``):

``input_len_range`` / ``output_len_range`` = [lo, hi]
    lengths uniform over the integers lo..hi (e.g. InferenceX's ``--random-range-ratio 0.8``
    at 1,024: [819, 1024]).
``output_eos_cap`` = N
    outputs of a run without ``--ignore-eos`` whose printed mean is below the configured
    ``--random-output-len N``: each request stops at EOS with the same chance p after every
    token (constant hazard) or at N, whichever comes first, with p solved so the mean is the
    printed one: mean(p) = (1 - (1 - p)^N) / p. An assumption (the run prints only the mean),
    stated in the point's ``lengths`` note.

Draws are deterministic: the distribution's quantiles at (i + 0.5) / n (so the mean is the
distribution's to within rounding), shuffled by a fixed seed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.errors import InputError

IntArray = npt.NDArray[np.int64]
SEED = 0


def uniform_lengths(n: int, lo: int, hi: int, salt: int = 0) -> IntArray:
    """``n`` lengths uniform over the integers ``lo..hi`` (quantiles, shuffled)."""
    if not 1 <= lo <= hi:
        raise InputError(f"length range [{lo}, {hi}]: need 1 <= lo <= hi")
    q = (np.arange(n) + 0.5) / n
    values = np.floor(lo + q * (hi - lo + 1)).astype(np.int64)
    return _shuffled(np.minimum(values, hi), salt)


def eos_hazard(cap: int, mean: float) -> float:
    """The per-token EOS chance p whose capped geometric mean (1 - (1 - p)^cap) / p is
    ``mean`` (bisection in log p; the mean falls as p grows)."""
    if not 1.0 <= mean < cap:
        raise InputError(f"EOS outputs: mean {mean} must be at least 1 and below the cap {cap}")
    lo, hi = 1e-12, 1.0
    for _ in range(200):
        p = math.sqrt(lo * hi)
        if _capped_mean(p, cap) > mean:
            lo = p
        else:
            hi = p
    return math.sqrt(lo * hi)


def _capped_mean(p: float, cap: int) -> float:
    return -math.expm1(cap * math.log1p(-p)) / p if p < 1.0 else 1.0


def eos_lengths(n: int, cap: int, mean: float, salt: int = 0) -> IntArray:
    """``n`` outputs stopping at EOS with a constant hazard, capped at ``cap``, mean ``mean``
    (the geometric distribution's quantiles, shuffled)."""
    p = eos_hazard(cap, mean)
    q = (np.arange(n) + 0.5) / n
    # geometric on 1, 2, ...: P(L <= k) = 1 - (1 - p)^k  ->  k = ceil(log(1 - q) / log(1 - p))
    k = np.ceil(np.log1p(-q) / math.log1p(-p)).astype(np.int64)
    return _shuffled(np.clip(k, 1, cap), salt)


def _shuffled(values: IntArray, salt: int) -> IntArray:
    out = values.copy()
    np.random.default_rng([SEED, salt]).shuffle(out)
    return out


def drawn_lengths(w: Mapping[str, Any], n: int) -> tuple[IntArray, IntArray] | None:
    """(inputs, outputs) of a random-dataset point whose ``workload`` names a distribution
    (module docstring); None when it names none (fixed lengths at the printed means)."""
    keys = ("input_len_range", "output_len_range", "output_eos_cap")
    if not any(k in w for k in keys):
        return None
    ins = _one(w, "input", n, salt=1)
    if "output_eos_cap" in w:
        outs = eos_lengths(n, int(w["output_eos_cap"]), float(w["mean_output_len"]), salt=2)
    else:
        outs = _one(w, "output", n, salt=2)
    return ins, outs


def _one(w: Mapping[str, Any], side: str, n: int, salt: int) -> IntArray:
    span = w.get(f"{side}_len_range")
    if span:
        return uniform_lengths(n, int(span[0]), int(span[1]), salt)
    return np.full(n, max(1, round(float(w[f"mean_{side}_len"]))), dtype=np.int64)
