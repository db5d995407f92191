"""The typer-free `simulate` path parses plain runs to the very dict typer gives the command,
hands everything else to typer, and prints what typer's path prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.cli.fast.simulate_args import DEFAULTS, FLAG, MULTI, OPTIONS, simulate_args

M = "meta-llama/Llama-3.1-8B"


def _command() -> Any:
    import typer.main

    from kvplan.cli.app import _register, app

    _register(("cmd_simulate",))
    return typer.main.get_group(app).commands["simulate"]


def test_the_table_is_the_typer_commands_parameters() -> None:
    from kvplan.cli import app as cli_app
    from kvplan.cli.fast import simulate_args as fast

    params = _command().params
    assert {p.name: p.default for p in params} == DEFAULTS
    want: dict[str, tuple[str, str]] = {}
    for p in params:
        if p.param_type_name != "option" or p.name in fast.DISAGG_FLAGS:
            continue
        kind = MULTI if p.multiple else FLAG if p.is_flag else type(p.type).__name__
        want.update({o: (p.name, kind) for o in [*p.opts, *p.secondary_opts]})
    names = {Path: "TyperPath", int: "IntParamType", float: "FloatParamType",
             str: "StringParamType"}
    got = {o: (f, k if isinstance(k, str) else names[k]) for o, (f, k, _) in OPTIONS.items()}
    assert got == want
    assert {o: on for o, (_, k, on) in OPTIONS.items() if k == FLAG and o.startswith("--no-")}
    assert all(not on for o, (_, k, on) in OPTIONS.items() if o.startswith("--no-"))
    assert fast._SLO_VALUE.pattern == cli_app._SLO_VALUE.pattern
    from kvplan.cli.cmd_simulate_disagg import DISAGG_FIELDS

    assert (*DISAGG_FIELDS, "router") == fast.DISAGG_FLAGS


PLAIN = [
    ["simulate", M],
    ["simulate", "--gpu", "A100", M, "--num-prompts", "50", "--json"],
    ["simulate", M, "-tp=2", "--request-rate", "inf", "--seed=3", "--no-enable-prefix-caching",
     "--max-model-len", "8k", "--kv-cache-memory", "2GiB", "--random-range-ratio", "0.5"],
    ["simulate", M, "--goodput", "ttft:500", "tpot:50", "--goodput", "e2el:9000", "--json"],
    ["simulate", M, "--goodput=ttft:500", "--dataset", "azure-conv", "-q", "fp8"],
    ["simulate", M, "--trace", "t.csv", "--save-result", "r.json", "--save-detailed",
     "--plot", "k.html", "--enable-chunked-prefill", "--expert-imbalance", "1.3",
     "--all2all-backend", "deepep", "-dp", "2", "--enable-expert-parallel"],
    ["simulate", M, "--num-prompts", "1_000", "--burstiness", "1e0", "--time-scale", "2"],
    ["simulate", M, "--async-scheduling", "--num-prompts", "20"],
    ["simulate", M, "--no-async-scheduling", "--enable-dbo", "--json"],
    ["simulate", M, "--"],
    ["simulate", "--json", "--", "vllm", "serve", M, "--max-num-seqs", "8", "--port", "1"],
    ["simulate", M, "--num-prompts", "20", "--", "vllm", "serve", M, "--", "x"],
]


@pytest.mark.parametrize("args", PLAIN)
def test_plain_runs_parse_to_typers_dict(args: list[str], monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    from kvplan.cli.app import MULTI_VALUE_OPTIONS, expand_multi_value
    from kvplan.cli.fast import simulate_run

    seen: list[dict[str, Any]] = []
    monkeypatch.setattr(simulate_run, "run_simulate", seen.append)
    _command().main(expand_multi_value(args[1:], MULTI_VALUE_OPTIONS), standalone_mode=False)
    fast = simulate_args(args)
    assert fast is not None
    assert fast == seen[0]
    assert {k: type(v) for k, v in fast.items()} == {k: type(v) for k, v in seen[0].items()}


@pytest.mark.parametrize("args", [
    ["simulate"], ["simulate", M, "--help"], ["simulate", M, "N"], ["simulate", M, "--bogus"],
    ["simulate", M, "--num-prompts", "x"], ["simulate", M, "--num-prompts"],
    ["simulate", M, "--seed", "-1"], ["simulate", M, "--seed", "1", "--seed", "2"],
    ["simulate", M, "--json", "--json"], ["simulate", M, "--json=1"], ["simulate", "--"],
    ["simulate", M, "--disagg", "1P1D"], ["simulate", M, "--router", "round-robin"],
    ["simulate", M, "-q=fp8"], ["simulate", M, "--gpu="], ["simulate", M, "--gpu", " H100"],
    ["simulate", "", "--json"], ["kv", M], [],
])
def test_the_rest_goes_to_typer(args: list[str]) -> None:
    assert simulate_args(args) is None


def _run(args: list[str], typer_only: bool, cwd: Path) -> tuple[int, str, str]:
    code = ("import sys; sys.argv = ['kvplan', *sys.argv[1:]]; "
            + ("from kvplan.cli.app import main" if typer_only else "from kvplan.cli import main")
            + "; main()")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300, cwd=cwd, env={**os.environ, "COLUMNS": "120"})
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args", [
    ["simulate", M, "--num-prompts", "200", "--json"],
    ["simulate", M, "--num-prompts", "200", "--request-rate", "20", "--goodput", "ttft:500",
     "tpot:50"],
    ["simulate", M, "--num-prompts", "100", "--save-result", "r.json", "--save-detailed",
     "--json"],
    ["simulate", "acme/unknown-model"],
    ["simulate", M, "--num-prompts", "0"],
    ["simulate", M, "--save-detailed"],
    ["simulate", M, "--max-model-len", "8q"],
    ["simulate", M, "--num-prompts", "50", "--async-scheduling", "--save-result", "r.json",
     "--json"],
    ["simulate", "--num-prompts", "50", "--json", "--", "vllm", "serve", M, "--max-num-seqs",
     "8", "--port", "8000", "--enforce-eager"],
    ["simulate", M, "--max-num-seqs", "8", "--", "vllm", "serve", M, "--max-num-seqs", "8"],
    ["simulate", "--", "vllm", "serve", M, "--max-model-lenn", "4096"],
])
def test_the_fast_path_prints_what_typer_prints(args: list[str], tmp_path: Path) -> None:
    assert simulate_args(args) is not None  # these do take the fast path
    (tmp_path / "fast").mkdir()
    (tmp_path / "slow").mkdir()
    fast, slow = _run(args, False, tmp_path / "fast"), _run(args, True, tmp_path / "slow")
    assert fast == slow
    assert fast[1] or fast[2]
    if "--save-result" in args:
        assert (tmp_path / "fast" / "r.json").read_bytes() == (
            tmp_path / "slow" / "r.json").read_bytes()


def test_a_trace_with_its_own_arrivals_imports_no_numpy_random_or_csv_for_random(
        tmp_path: Path) -> None:
    """azure-conv's arrivals are its own (no generator: numpy.random, secrets, hashlib's
    OpenSSL); a random workload reads no trace module (csv). A cache folder of its own: with
    the draws already kept (specs/requests/random_cache.py) the random run skips
    numpy.random, whatever ran before in a shared folder."""
    code = ("import sys; sys.argv = ['kvplan', 'simulate', {m!r}, {extra}, '--num-prompts', "
            "'20', '--json']\nfrom kvplan.cli import main\nmain()\nprint(sorted(m for m in "
            "('numpy.random', 'csv', 'kvplan.specs.requests.traces') if m in sys.modules), "
            "file=sys.stderr)")
    for extra, want in (("'--dataset', 'azure-conv'", "['csv', 'kvplan.specs.requests.traces']"),
                        ("'--dataset', 'random'", "['numpy.random']")):
        p = subprocess.run([sys.executable, "-c", code.format(m=M, extra=extra)],
                           capture_output=True, text=True, timeout=300, check=True,
                           env={**os.environ, "KVPLAN_CACHE_DIR": str(tmp_path)})
        assert p.stderr.strip().splitlines()[-1] == want


def test_a_plain_simulate_imports_no_typer_click_or_rich() -> None:
    code = (f"import sys; sys.argv = ['kvplan', 'simulate', {M!r}, '--num-prompts', '20', "
            "'--json']\nfrom kvplan.cli import main\nmain()\nprint(sorted(m for m in ('typer', "
            "'click', 'rich', 'numpy.ma') if m in sys.modules), file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, check=True)
    assert p.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("where", ["kvplan.cli.fast.entry", "kvplan.cli.app"])
@pytest.mark.parametrize(("stop", "code", "err"), [(KeyboardInterrupt, 130, ""),
                                                    (EOFError, 2, "\nerror: aborted\n")])
def test_ctrl_c_and_eof_end_alike_on_both_paths(where: str, stop: type[BaseException],
                                                code: int, err: str,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C exits 130 quietly (typer's Exit(130); it used to end as a success), EOF is
    click's "aborted"."""
    import importlib

    from kvplan.cli.fast import simulate_run

    def interrupted(_: dict[str, Any]) -> None:
        raise stop

    monkeypatch.setattr(simulate_run, "run_simulate", interrupted)
    monkeypatch.setattr(sys, "argv", ["kvplan", "simulate", M, "--json"])
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(where).main()
    assert exit_.value.code == code
    assert capsys.readouterr().err == err


_ODD = st.sampled_from([" 5", "5 ", "+3", "0x10", "1e3", "2.5", "inf", "nan", "-1", "",
                        "--json", "1_000", "\u0663", "8k", "24GiB"])
_BY_KIND: dict[Any, Any] = {
    int: st.sampled_from(["0", "1", "7", "64", "512", "10000"]),
    float: st.sampled_from(["0", "0.5", "1", "20", "1e3", "inf"]),
    str: st.sampled_from(["auto", "fp8", "8k", "24GiB", "random", "H100", "ttft,itl", "99"]),
    Path: st.sampled_from(["x.csv", "out/r.json", "k.html"]),
    MULTI: st.sampled_from(["ttft:500", "tpot:p99:50", "e2el:9000"]),
}


@st.composite
def _argv(draw: st.DrawFn) -> list[str]:
    """simulate argv: the model somewhere among random options, mostly well-formed values
    (each option's kind), some odd ones, both option forms."""
    names = sorted(OPTIONS)
    args: list[str] = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.sampled_from(names))
        kind = OPTIONS[name][1]
        if kind == FLAG:
            args.append(name)
            continue
        value = draw(_ODD if draw(st.integers(0, 5)) == 0 else _BY_KIND[kind])
        if draw(st.booleans()):
            args.append(f"{name}={value}")
        else:
            args += [name, value]
        if kind == MULTI and draw(st.booleans()):
            args.append(draw(_BY_KIND[MULTI]))  # --goodput a b
    args.insert(draw(st.integers(0, len(args))), M)
    return ["simulate", *args]


@settings(max_examples=300, deadline=None)
@given(args=_argv())
def test_whatever_the_fast_parser_takes_typer_takes_alike(args: list[str]) -> None:
    """Every dict the fast parser gives is typer's for the same argv (None hands it over)."""
    from kvplan.cli.app import MULTI_VALUE_OPTIONS, expand_multi_value
    from kvplan.cli.fast import simulate_run

    fast = simulate_args(args)
    if fast is None:
        return
    seen: list[dict[str, Any]] = []
    real = simulate_run.run_simulate
    simulate_run.run_simulate = seen.append  # type: ignore[assignment]
    try:
        _command().main(expand_multi_value(args[1:], MULTI_VALUE_OPTIONS),
                        standalone_mode=False)
    finally:
        simulate_run.run_simulate = real
    assert len(seen) == 1  # the same values (repr: a nan is a nan) of the same types
    assert {k: (type(v), repr(v)) for k, v in fast.items()} == {
        k: (type(v), repr(v)) for k, v in seen[0].items()}
