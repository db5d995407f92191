"""The CLI entry: vLLM-style multi-value options and one-line errors for usage mistakes."""

from kvplan.cli.app import expand_multi_value
from tests.conftest import assert_one_line_error, run_cli

GOODPUT = ("--goodput",)


def test_goodput_values_expand() -> None:
    argv = ["simulate", "M", "--goodput", "ttft:500", "tpot:50", "e2el:1000", "--json"]
    assert expand_multi_value(argv, GOODPUT) == [
        "simulate",
        "M",
        "--goodput",
        "ttft:500",
        "--goodput",
        "tpot:50",
        "--goodput",
        "e2el:1000",
        "--json",
    ]


def test_positional_after_goodput_untouched() -> None:
    argv = ["simulate", "--goodput", "ttft:500", "meta-llama/Llama-3.1-8B"]
    assert expand_multi_value(argv, GOODPUT) == argv


def test_after_double_dash_untouched() -> None:
    argv = ["capacity", "--", "vllm", "serve", "--goodput", "a:1", "b:2"]
    assert expand_multi_value(argv, GOODPUT) == argv


def test_unknown_command_one_line() -> None:
    assert_one_line_error(run_cli("no-such-command"))


def test_no_args_prints_help() -> None:
    r = run_cli()
    assert r.code == 0 and "Usage" in r.out
