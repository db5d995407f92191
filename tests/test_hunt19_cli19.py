"""Hunt 19, cli19: the command line as a careless or hurried user types it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.analysis.plan import executor, planner
from kvplan.errors import InputError
from tests.conftest import assert_one_line_error, run_cli


def _plan(monkeypatch: pytest.MonkeyPatch, **options: Any) -> None:
    """kvplan.plan on a small random workload; the search itself must never start (a refused
    option is refused before it), so starting an executor fails the test at once."""
    def no_search(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the search started: the option was not refused")

    monkeypatch.setattr(planner, "pick_executor", no_search)
    slo = kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:2000"]))
    work = kvplan.WorkloadArgs(num_prompts=20, request_rate=2.0)
    planner.plan("Qwen/Qwen3-8B", work, slo, gpus=["H100"], **options)


def test_plan_refuses_more_workers_than_the_machine_can_run(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # Was: `kvplan plan ... --workers 100000` had no upper bound; the local pool forked worker
    # processes until the machine stalled (2,945 processes in 2 minutes on a 2-core box, no
    # answer). The jobs are CPU-bound, so workers beyond a few per core only cost memory and
    # start-up; now one error line naming the range, before any work.
    monkeypatch.setattr(executor, "usable_cpus", lambda: 2, raising=False)
    with pytest.raises(InputError, match=r"--workers must be a whole number in \[1, 8\]"):
        _plan(monkeypatch, workers=100_000)
    with pytest.raises(InputError, match=r"--workers"):
        _plan(monkeypatch, workers=9)


def test_plan_refuses_a_fleet_of_a_hundred_million_replicas(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # Was: `kvplan plan Qwen/Qwen3-8B --gpu H100 --replicas 100000000 --num-prompts 20
    # --request-rate 2 --slo ttft:p99:2000` ran for hours: every fleet run walks every
    # replica (--replicas 10^5: 15 s, 10^6: 2 minutes, linear). Now one error line with the
    # range (limits.MAX_REPLICAS: 10,000 replicas of 8 GPUs would be 80,000 GPUs).
    with pytest.raises(InputError, match=r"--replicas must be a whole number in "
                                         r"\[1, 10,000\], got 100000000"):
        _plan(monkeypatch, replicas=100_000_000)
    with pytest.raises(InputError, match=r"--replicas must be a whole number in \[1, 10,000\]"):
        _plan(monkeypatch, replicas=0)


def test_pasted_rope_scaling_warning_does_not_send_the_user_into_an_error() -> None:
    # Was: `capacity --gpu H100 -- vllm serve Qwen/Qwen3-8B --rope-scaling '{...yarn, factor
    # 4, original 32768}'` warned "--rope-scaling ignored: ...; pass --max-model-len", and
    # following it (--max-model-len 131072 = 32768 x 4, what vLLM derives) was refused: the
    # model's own limit without the scaling is 40,960. The way that works is a config.json
    # with the rope_scaling, which kvplan reads as vLLM does.
    rope = '{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}'
    r = run_cli("capacity", "--gpu", "H100", "--json", "--", "vllm", "serve", "Qwen/Qwen3-8B",
                "--rope-scaling", rope)
    assert r.code == 0, r.err
    warning = [line for line in r.err.splitlines() if "--rope-scaling" in line]
    assert len(warning) == 1 and "pass --max-model-len" not in warning[0]
    assert "config.json" in warning[0]


def test_kvplan_option_typed_after_the_pasted_line_says_to_move_it() -> None:
    # Was: `kvplan simulate -- vllm serve Qwen/Qwen3-8B --json` (kvplan's --json at the end of
    # the line) said "vllm serve refuses --json: unrecognized argument (vLLM 0.11.0); did you
    # mean --revision?", --num-prompts "did you mean --enable-prompt-embeds?": vLLM's nearest
    # option, nothing a user meant. Still refused (vLLM refuses it), now with the fix.
    shape = ("--prompt", "8", "--output", "8")
    for cmd, flag in (("simulate", "--json"), ("simulate", "--num-prompts"),
                      ("latency", "--sweep"), ("capacity", "--plot")):
        extra = shape if cmd == "latency" else ()
        r = run_cli(cmd, "--gpu", "H100", *extra, "--", "vllm", "serve", "Qwen/Qwen3-8B", flag,
                    "1")
        assert_one_line_error(r)
        assert f"{flag} is kvplan's own option: give it before the --" in r.err, r.err
        assert "did you mean" not in r.err


def test_kvplan_own_options_list_every_option_vllm_serve_lacks() -> None:
    # KVPLAN_OWN must follow the commands' options, or a new one gets vLLM's nearest option.
    import typer

    from kvplan.cli import app
    from kvplan.cli.vllm_options import KVPLAN_OWN, serve_options

    app._register()
    group = typer.main.get_command(app.app)
    vllm = serve_options().takes_value
    for name in app.PASTED_LINE_COMMANDS:
        params = group.commands[name].params  # type: ignore[attr-defined]
        own = {o for p in params for o in (*p.opts, *p.secondary_opts) if o.startswith("--")}
        lacking = {o for o in own if o not in vllm and not any(k.startswith(o) for k in vllm)}
        assert lacking <= KVPLAN_OWN, (name, lacking - KVPLAN_OWN)


def test_price_with_a_decimal_comma_is_named_as_such() -> None:
    # Was: `kvplan prices --price H100=2,49` (a decimal comma) split into 'H100=2' and '49'
    # and said "error: --price '49': use GPU=USD_PER_GPU_HOUR, e.g. H100=2.49", naming a
    # price the user never typed. Now the whole item and what to write instead.
    for cmd in (("prices",), ("plan", "Qwen/Qwen3-8B", "--slo", "ttft:p99:2000")):
        r = run_cli(*cmd, "--price", "H100=2,49")
        assert_one_line_error(r)
        assert "--price 'H100=2,49': a comma separates prices" in r.err, r.err
        assert "decimal point" in r.err
    assert run_cli("prices", "--price", "H100=2.49,L40S=0.86", "--json").code == 0


def test_price_file_that_prices_one_instance_twice_is_refused(tmp_path: Path) -> None:
    # Was: a --prices CSV with lambda's '8x H100 SXM' on two rows, $31.92 and $8.00 an
    # instance-hour (a pasted row edited in the wrong place), was read without a word and
    # the planner priced H100s at the cheaper $1.00/GPU-hour (8.00 / 8). --price refuses
    # two prices for one GPU; the file now refuses two for one instance. An identical
    # repeated row stays harmless.
    head = ("gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
            "source_url,observed_on,transcribed_by\n")
    row = "H100-SXM-80GB,lambda,8x H100 SXM,8,8,{usd},https://lambda.ai/pricing,2026-09-20,me\n"
    two = tmp_path / "two.csv"
    two.write_text(head + row.format(usd=31.92) + row.format(usd=8.00))
    r = run_cli("prices", "--prices", str(two))
    assert_one_line_error(r)
    assert "line 3: lambda '8x H100 SXM' (H100-SXM-80GB) is also on line 2" in r.err, r.err
    same = tmp_path / "same.csv"
    same.write_text(head + row.format(usd=31.92) + row.format(usd=31.92))
    assert run_cli("prices", "--prices", str(same), "--json").code == 0
