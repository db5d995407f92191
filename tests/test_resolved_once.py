"""One simulate / capacity run resolves each engine flag once (ResolvedDeployment)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

from kvplan.cli.app import main
from kvplan.costs.memory import params, resolved, settings, weight_formats
from kvplan.costs.step import constants
from kvplan.specs import kv, kv_precision

WATCHED: dict[str, Callable[..., Any]] = {
    "kv_spec": kv.kv_spec,
    "check_tensor_parallel": kv.check_tensor_parallel,
    "resolve_precision": kv_precision.resolve_precision,
    "resolve_format": weight_formats.resolve_format,
    "resolve_settings": settings.resolve_settings,
    "settings_for": settings.settings_for,
    "compute_precision": constants.compute_precision,
    "gemm_dtype": constants.gemm_dtype,
    "precision_of": resolved.precision_of,
    "resolve_deployment": resolved.resolve_deployment,
}
@contextmanager
def counting() -> Iterator[Counter[tuple[str, str]]]:
    """Count (function, caller) calls of WATCHED by code object (import aliases included)."""
    codes = {f.__code__: name for name, f in WATCHED.items()}
    calls: Counter[tuple[str, str]] = Counter()

    def hook(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and frame.f_code in codes:
            caller = frame.f_back.f_code.co_name if frame.f_back else "?"
            calls[codes[frame.f_code], caller] += 1

    constants._MEMO._held.clear()  # a cold run: nothing memoised from earlier tests
    params.WEIGHT_MEMO._held.clear()
    kv._KV_MEMO.clear()
    sys.setprofile(hook)
    try:
        yield calls
    finally:
        sys.setprofile(None)


def _run(monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    monkeypatch.setattr(sys, "argv", ["kvplan", *args])
    try:
        main()
    except SystemExit as exc:
        assert exc.code in (0, None)


def _by_function(calls: Counter[tuple[str, str]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for (name, _caller), n in calls.items():
        out[name] += n
    return out


@pytest.mark.parametrize("extra", [(), ("--quantization", "fp8", "--kv-cache-dtype", "fp8")])
def test_simulate_resolves_each_flag_once(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          extra: tuple[str, ...]) -> None:
    with counting() as calls:
        _run(monkeypatch, "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
             "--num-prompts", "5", "--json", *extra)
    assert '"completed": 5' in capsys.readouterr().out
    assert _by_function(calls) == {
        "resolve_deployment": 1, "check_tensor_parallel": 1, "resolve_format": 1,
        "settings_for": 1, "kv_spec": 1, "resolve_precision": 1, "precision_of": 1,
    }
    # the KV dtype is read in kv_spec only (its body, _kv_spec, behind a memo, through
    # model_precision: DeepSeek-V3.2's sparse MLA turns auto / fp8 into fp8_ds_mla)
    assert calls["resolve_precision", "model_precision"] == 1
    assert calls["resolve_format", "resolve_deployment"] == 1  # weights, GEMMs: the same one


def test_capacity_resolves_each_flag_once(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with counting() as calls:
        _run(monkeypatch, "capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--json")
    assert '"num_blocks"' in capsys.readouterr().out
    counts = _by_function(calls)
    for name in ("resolve_deployment", "check_tensor_parallel", "resolve_format",
                 "settings_for", "kv_spec", "resolve_precision"):
        assert counts[name] == 1, (name, calls)
    assert counts["resolve_settings"] == counts["compute_precision"] == 0


def test_latency_resolves_each_flag_once(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """One answer and its --explain view: one resolution; the shape's --max-model-len P+O
    refills the settings only (a second settings_for, no second format or KV layout)."""
    with counting() as calls:
        _run(monkeypatch, "latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
             "--prompt", "512", "--output", "16", "--json")
    assert '"step_ops"' in capsys.readouterr().out
    counts = _by_function(calls)
    for name in ("resolve_deployment", "check_tensor_parallel", "resolve_format", "kv_spec",
                 "resolve_precision", "precision_of"):
        assert counts[name] == 1, (name, calls)
    assert counts["settings_for"] == 2
    assert counts["resolve_settings"] == counts["compute_precision"] == counts["gemm_dtype"] == 0
