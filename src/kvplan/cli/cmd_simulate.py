"""The simulate command's typer declaration: capacity plan + step cost model + workload ->
simulate -> metrics. The work is fast/simulate_run.py's (plain runs reach it without typer:
fast/simulate_args.py parses them to the same dict)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli import cmd_simulate_disagg as dg
from kvplan.cli import flags as fl
from kvplan.cli.app import app
from kvplan.cli.fast import simulate_run as sr


def _opt(flag: str, help_: str = "") -> Any:
    return typer.Option(flag, help=help_)


# `vllm bench serve`'s workload flags (WorkloadArgs fields) and simulate's own outputs
Dataset = Annotated[str | None, _opt("--dataset", "random or a bundled trace name.")]
NumPrompts = Annotated[int | None, _opt("--num-prompts")]
InLen = Annotated[int, _opt("--random-input-len")]
OutLen = Annotated[int, _opt("--random-output-len")]
RangeRatio = Annotated[float, _opt("--random-range-ratio")]
PrefixLen = Annotated[int, _opt("--random-prefix-len")]
Rate = Annotated[float | None, _opt("--request-rate", "req/s; inf = all at once")]
Burst = Annotated[float, _opt("--burstiness")]
MaxConc = Annotated[int | None, _opt("--max-concurrency")]
Seed = Annotated[int, _opt("--seed", "0 .. 2**32 - 1: random lengths and arrival times, as "
                                      "vllm bench serve --seed draws them.")]
TimeScale = Annotated[float, _opt("--time-scale")]
Trace = Annotated[str | None, _opt("--trace", "CSV or JSONL trace file.")]  # str: '' stays ''
TraceCols = Annotated[str | None, _opt("--trace-columns")]
Goodput = Annotated[list[str] | None, _opt("--goodput", "ttft:MS tpot:MS e2el:MS")]
PctMetrics = Annotated[str, _opt("--percentile-metrics")]
Pcts = Annotated[str, _opt("--metric-percentiles")]
SaveResult = Annotated[Path | None, _opt("--save-result", "vllm bench JSON here (the summary).")]
SaveDetailed = Annotated[bool, _opt("--save-detailed",
                                    "With --save-result: add the per-request lists, as vLLM.")]
Plot = Annotated[Path | None, _opt("--plot", "KV usage chart (.png, .svg or .html).")]
ModelArg = Annotated[list[str] | None, typer.Argument(
    metavar="MODEL [-- vllm serve MODEL ...]",
    help="Catalog id or config.json path; or, after --, a pasted vLLM command line.")]
GpuOpt = Annotated[str, _opt("--gpu", "GPU id from 'kvplan gpus'.")]
ProfileOpt = Annotated[str | None, _opt("--profile", "Profile JSON from 'kvplan calibrate'.")]


@app.command("simulate")
def simulate_cmd(
    model_and_args: ModelArg = None, gpu: GpuOpt = "H100",
    tensor_parallel_size: fl.TpOpt = None, pipeline_parallel_size: fl.PpOpt = None,
    gpu_memory_utilization: fl.GpuUtilOpt = None, max_model_len: fl.MaxLenOpt = None,
    kv_cache_dtype: fl.KvDtypeOpt = None, dtype: fl.DtypeOpt = None,
    quantization: fl.QuantOpt = None, block_size: fl.BlockOpt = None,
    max_num_batched_tokens: fl.BatchedOpt = None, max_num_seqs: fl.SeqsOpt = None,
    kv_cache_memory_bytes: fl.KvMemOpt = None, num_gpu_blocks_override: fl.BlocksOpt = None,
    mamba_cache_dtype: fl.MambaOpt = None,
    mamba_ssm_cache_dtype: fl.MambaSsmOpt = None, profile: ProfileOpt = None,
    long_prefill_token_threshold: fl.LongPrefillOpt = None,
    max_num_partial_prefills: fl.PartialPrefillsOpt = None,
    enable_prefix_caching: fl.PrefixOpt = None, enable_chunked_prefill: fl.ChunkedOpt = None,
    dataset: Dataset = None, num_prompts: NumPrompts = None, random_input_len: InLen = 1024,
    random_output_len: OutLen = 128, random_range_ratio: RangeRatio = 0.0,
    random_prefix_len: PrefixLen = 0, request_rate: Rate = None, burstiness: Burst = 1.0,
    max_concurrency: MaxConc = None, seed: Seed = 0, time_scale: TimeScale = 1.0,
    trace: Trace = None, trace_columns: TraceCols = None, goodput: Goodput = None,
    percentile_metrics: PctMetrics = "ttft,tpot,itl,e2el", metric_percentiles: Pcts = "99",
    save_result: SaveResult = None, save_detailed: SaveDetailed = False, plot: Plot = None,
    as_json: fl.JsonOpt = False, disagg: dg.DisaggOpt = None, prefill_gpu: dg.PrefillGpuOpt = None,
    prefill_tp: dg.PrefillTpOpt = None, prefill_instances: dg.PrefillNOpt = None,
    decode_gpu: dg.DecodeGpuOpt = None, decode_tp: dg.DecodeTpOpt = None,
    decode_instances: dg.DecodeNOpt = None, kv_link: dg.LinkOpt = None,
    prefill_dp: dg.PrefillDpOpt = None, decode_dp: dg.DecodeDpOpt = None,
    router: dg.RouterOpt = None, data_parallel_size: fl.DpOpt = None,
    enable_expert_parallel: fl.EpOpt = None, all2all_backend: fl.A2aOpt = None,
    expert_imbalance: fl.ImbalanceOpt = None, mxfp4_moe_backend: fl.Mxfp4Opt = None,
    enable_dbo: fl.DboOpt = None,
    dbo_decode_token_threshold: fl.DboDecodeOpt = None,
    dbo_prefill_token_threshold: fl.DboPrefillOpt = None, async_scheduling: fl.AsyncOpt = None,
) -> None:
    """Replay a workload on a simulated vLLM server: TTFT/TPOT/ITL/E2EL, KV usage, preemptions."""
    sr.run_simulate(dict(locals()))
