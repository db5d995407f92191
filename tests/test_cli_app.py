"""The CLI entry: vLLM-style multi-value options and one-line errors for usage mistakes."""

import subprocess
import sys

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


def test_command_table_names_every_command_and_its_module() -> None:
    """main() imports only the named command's module, so the table must be exact."""
    from kvplan.cli.app import COMMAND_MODULES, COMMANDS, _register, app

    _register()
    found = {c.name: c.callback.__module__.rsplit(".", 1)[1] for c in app.registered_commands}
    assert found == COMMANDS
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)


def test_one_command_run_imports_only_its_module() -> None:
    code = ("import sys; sys.argv = ['kvplan', 'gpus', '--json']\n"
            "from kvplan.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kvplan.cli.cmd_')), "
            "'rich' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip() == "['kvplan.cli.cmd_capacity'] False"


def test_help_lists_commands_in_module_order_after_a_run_in_process() -> None:
    """A second main() in one process (a run, then --help) lists commands as a fresh one."""
    code = ("import sys\nfrom kvplan.cli import main\n"
            "for argv in (['gpus', '--json'], ['--help']):\n"
            "    sys.argv = ['kvplan', *argv]\n"
            "    try:\n        main()\n    except SystemExit:\n        pass\n")
    two = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    fresh = run_cli("--help")
    listed = two.stdout[two.stdout.index("Commands"):]
    assert fresh.out[fresh.out.index("Commands"):] == listed
