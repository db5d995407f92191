"""Every command's name, module and one-line summary, in help order, without typer."""

from __future__ import annotations

ROOT_HELP = "KV-cache memory, capacity, latency and serving simulation for LLM serving."
VERSION_HELP = "Print kvplan's version and exit."

COMMANDS: dict[str, tuple[str, str]] = {
    "models": ("cmd_kv", "List the bundled model catalog (Hugging Face ids, attention kind, cache"
                         " per token)."),
    "kv": ("cmd_kv", "KV cache bytes per token, whole model and per GPU, with the formula filled "
                     "in."),
    "request": ("cmd_kv", "A request's memory-claim schedule: prefill jump, chunk staircase, "
                          "decode trickle."),
    "batch": ("cmd_kv", "A batch's KV footprint: bytes per token x context x batch (windows and "
                        "state applied)."),
    "levers": ("cmd_kv", "How each lever (MHA vs GQA/MLA, cache dtype, TP) multiplies the "
                         "footprint; they stack."),
    "capacity": ("cmd_capacity", "How many requests fit: vLLM 0.11's memory budget, KV blocks, "
                                 "tokens and concurrency."),
    "gpus": ("cmd_capacity", "List the bundled GPU catalog (memory, bandwidth, dense bf16 FLOP/s,"
                             " interconnect, whose measured kernel tables price each GPU)."),
    "latency": ("cmd_latency", "TTFT, TPOT, end-to-end time and throughput of a static batch, "
                               "priced op by op from measured kernels (the roofline where a GPU "
                               "has no tables)."),
    "calibrate": ("cmd_calibrate", "Fit the latency profile per GPU and precision: serving runs "
                                   "(vllm bench serve results, CSV sweeps) through the "
                                   "simulator, vllm bench latency files as static batches."),
    "simulate": ("cmd_simulate", "Replay a workload on a simulated vLLM server: "
                                 "TTFT/TPOT/ITL/E2EL, KV usage, preemptions."),
    "plan": ("cmd_plan", "Cheapest configuration that meets the SLO: funnel search, verified "
                         "fleet, why, levers."),
    "prices": ("cmd_prices", "GPU prices per provider and instance shape, each with its source "
                             "page and date."),
    "web": ("cmd_web", "Serve the web page (Model, Request, Capacity, Latency, Simulate, Plan) "
                       "and its JSON API."),
    "report": ("cmd_web", "One self-contained HTML file (data, charts, scripts inline) that opens"
                          " offline."),
}
"""Command name -> (the module that defines it, the first paragraph of its docstring); a test
checks both against the registered commands, so ``kvplan --help`` (cli.root_help) can be
written without importing them."""
