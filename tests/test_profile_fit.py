"""The bundled-profile fit (kvplan.analysis.calibration.profile_fit): re-pricing only the
points a factor reaches gives the same fit as re-pricing every point, and the API path is fitted
only for engines with served points."""

from __future__ import annotations

from kvplan.analysis.calibration import profile_fit as pf
from kvplan.analysis.calibration.public_set import CalPoint
from kvplan.costs.step.profile import Profile


def _point(i: int, gpu: str, engine: str, served: bool) -> CalPoint:
    def predict(p: Profile) -> dict[str, float]:
        # a made-up but monotone response to every fitted factor
        ttft = (0.02 * i + 1e-3 / p.compute_eff + p.prefill_overhead_s + p.layer_overhead_s * 30
                + p.api_delay_s(1000 * i) * served)
        tpot = 2e-3 / p.bandwidth_eff + p.step_overhead_s + p.request_overhead_s * i
        return {"ttft_s": ttft, "tpot_s": tpot + p.moe_layer_overhead_s + p.allreduce_latency_s}

    truth = Profile(compute_eff=0.4 if gpu == "A" else 0.5, bandwidth_eff=0.8,
                    prefill_overhead_s=3e-3, step_overhead_s=0.4e-3, api_request_s=0.02,
                    api_prompt_token_s=2e-6)
    return CalPoint(id=f"p{i}", source="s", family="dense", model="m", gpu=gpu, tp=1,
                    precision="bfloat16", measured=predict(truth), predict=predict,
                    engine=engine, served=served)


POINTS = [_point(i, gpu, engine, engine == "vllm") for i, (gpu, engine) in enumerate(
    [("A", "vllm"), ("A", "vllm"), ("B", "vllm"), ("B", "trtllm"), ("A", "trtllm"),
     ("B", "vllm")], start=1)]


def _reference_fit(points: list[CalPoint], rounds: int, grid: int) -> pf.Fit:
    """The fit as it was before the per-point cache: every trial re-prices every point."""
    fit = pf._start(points)
    served = {p.engine for p in points if p.served}
    keys = ([("*", k) for k in pf.SHARED] + [(f"engine:{e}", k) for e in fit.per_engine
                                             for k in pf.PER_ENGINE
                                             if (e in served and k not in pf.FIXED)
                                             or (e not in served and k not in pf.API)]
            + [(g, k) for g in fit.per_gpu for k in pf.PER_GPU])
    width = {k: (pf.BOUNDS[k[1]][1] - pf.BOUNDS[k[1]][0]) / 2 for k in keys}
    best = pf.fit_loss(fit, points)
    for _ in range(rounds):
        for key in keys:
            lo, hi = pf.BOUNDS[key[1]]
            centre = pf._get(fit, key)
            for i in range(grid):
                value = min(hi, max(lo, centre + width[key] * (2 * i / (grid - 1) - 1)))
                trial = pf._with(fit, key, value)
                loss = pf.fit_loss(trial, points)
                if loss < best - 1e-12:
                    fit, best = trial, loss
        width = {k: w / 2.0 for k, w in width.items()}
    return pf._rounded(fit)


def test_cached_fit_equals_re_pricing_every_point() -> None:
    assert pf.fit_points(POINTS, rounds=4, grid=5) == _reference_fit(POINTS, 4, 5)


def test_api_path_is_fitted_only_where_points_were_served() -> None:
    fit = pf.fit_points(POINTS, rounds=4, grid=5)
    assert fit.per_engine["trtllm"]["api_request_s"] == 0.0
    assert fit.per_engine["trtllm"]["api_prompt_token_s"] == 0.0
    assert fit.per_engine["trtllm"]["api_admission_s"] == 0.0
    assert fit.per_engine["vllm"]["api_request_s"] > 0.0


def test_prefill_overhead_is_held_at_zero_where_an_api_path_carries_it() -> None:
    """A served engine's step pays its kernels plus its requests' host work: the bundled fit
    keeps no per-step prefill constant for it, whatever the points would pull it to (their
    truth here has 3 ms); a static-batch-only engine (no API path) still fits its own."""
    fit = pf.fit_points(POINTS, rounds=4, grid=5)
    assert fit.per_engine["vllm"]["prefill_overhead_s"] == 0.0
    assert fit.per_engine["trtllm"]["prefill_overhead_s"] > 0.0
    assert "prefill_overhead_s (engine vllm)" not in pf.pinned(fit)


def test_a_factor_a_hair_below_its_bound_is_pinned() -> None:
    """The line search stops short of a bound (1.998 ms for 2 ms): within 1% of the range
    counts as on it; halfway does not."""
    hi = pf.BOUNDS["step_overhead_s"][1]  # 20 ms
    fit = pf.fit_points(POINTS, rounds=1, grid=3)
    near = pf._with(fit, ("engine:vllm", "step_overhead_s"), hi * 0.999)
    half = pf._with(fit, ("engine:vllm", "step_overhead_s"), hi * 0.5)
    assert "step_overhead_s (engine vllm)" in pf.pinned(near)
    assert "step_overhead_s (engine vllm)" not in pf.pinned(half)
