"""Generators for every input family: CLI arguments of every command, config.json files
(mutated and broken), trace CSVs, GPU files, latency profiles, calibration inputs, output paths.

Each strategy yields a ``Case``: an argv plus the files (and folders, links) to create in a
fresh folder first; every file created is an input the run must leave unchanged. Simulations
stay small (a handful of requests) so that thousands of examples run in minutes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

MODELS = ("meta-llama/Llama-3.2-1B", "Qwen/Qwen2.5-7B", "google/gemma-2-9b-it",
          "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-Next-80B-A3B-Thinking", "tiiuae/falcon-7b",
          "openai/gpt-oss-20b", "meta-llama/Llama-3.1-70B", "mistralai/Mistral-7B-v0.1",
          "nvidia/Nemotron-H-56B-Base-8K")
BAD_MODELS = ("", "x", "nope/nope", "meta-llama/Llama-3.1-8B-Instruct", "llama", "a" * 300,
              "../config.json", "models--x--y", "org/" + "n" * 200, "Qwen/Qwen2.5-7B-Instruct-AWQ")
GPUS = ("H100", "A100-40GB-SXM", "L4", "RTX-3090", "H200", "L40S", "h100")
BAD_GPUS = ("", "Z80", "gpu.yaml.missing", "H100 ", "x" * 300)
INTS = ("-1", "0", "1", "2", "3", "4", "7", "8", "16", "64", "100", "512", "1000", "4096",
        "8192", "32768", "131072", "1000000", "2147483648", "99999999", "100000000",
        "10000000000", "1" + "0" * 30, "abc", "1.5", "8k", "32K", "1m", "-0", " 5", "", "1e3",
        "nan", "inf", "0x10")
SMALL = ("1", "2", "3", "5", "8", "16")
FLOATS = ("0", "0.01", "0.5", "0.9", "0.95", "1", "1.0001", "1.5", "-1", "nan", "inf", "-inf",
          "1e309", "1e-300", "abc", "")
SIZES = ("24GiB", "1GiB", "512MiB", "1KiB", "0", "-1GiB", "1e30", "1e309", "1e300TiB", "lots",
         "10PiB", "1.5GiB", "1 GiB", "2GB", "100", "nan", "inf", "9" * 400, "GiB")
KV_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2", "bfloat16", "float16", "int8_per_token_head",
             "fp8_per_token_head", "nvfp4", "fp4", "int3", "")
DTYPES = ("auto", "bfloat16", "float16", "float32", "half", "fp8", "")
QUANTS = ("fp8", "awq", "gptq", "int3", "bitsandbytes", "")
MAMBA = ("auto", "float32", "float16", "x")
DATASETS = ("random", "azure-conv", "azure-code", "mooncake-conversation", "mooncake-synthetic",
            "sharegpt", "sharegpt-multiturn", "arxiv-summarization", "bwb", "nope")
JSON_VALUES: tuple[Any, ...] = (None, True, False, -1, 0, 1, 2, 3, 7, 64, 4096, 2**31, 2**63,
                                10**30, 1.5, -0.5, 1e308, "x", "", "bfloat16", [], [1, 2], {},
                                {"a": 1}, 65536)


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()
    dirs: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    fifos: tuple[str, ...] = ()
    hardlinks: tuple[tuple[str, str], ...] = ()
    """(new name, existing file): a second name of one file."""
    env: tuple[tuple[str, str], ...] = ()
    """Environment for the run; ``{root}`` in a value is the example's folder."""
    stdout: str = ""
    """'' a normal stdout; 'ENOSPC', 'EFBIG', 'EIO' or 'EPIPE': every write fails so."""
    watch: tuple[str, ...] = ()
    """Folders whose every file is an input too (a Hugging Face cache: no flag names a blob)."""


def _catalog_file(model_id: str) -> bytes:
    name = model_id.replace("/", "--", 1) + ".json"
    return (resources.files("kvplan.specs.catalog") / "models" / name).read_bytes()


def _default_profile() -> dict[str, Any]:
    path = resources.files("kvplan") / "data" / "profiles" / "default.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


@st.composite
def flags(draw: st.DrawFn, options: dict[str, tuple[str, ...]], most: int = 4) -> list[str]:
    """A few ``--flag value`` pairs from ``options`` (values drawn from each flag's pool)."""
    names = draw(st.lists(st.sampled_from(sorted(options)), max_size=most, unique=True))
    out: list[str] = []
    for name in names:
        pool = options[name]  # pools list good values first: favour the first half
        value = draw(st.one_of(st.sampled_from(pool[: max(1, len(pool) // 2)]),
                               st.sampled_from(pool)))
        out += [f"{name}={value}"] if draw(st.booleans()) and name.startswith("--") else [name,
                                                                                         value]
    return out


def mostly(good: tuple[str, ...], bad: tuple[str, ...]) -> st.SearchStrategy[str]:
    """Three in four draws from ``good``, so most runs reach the arithmetic."""
    return st.one_of(st.sampled_from(good), st.sampled_from(good), st.sampled_from(good),
                     st.sampled_from(bad))


def model_arg() -> st.SearchStrategy[str]:
    return st.one_of(mostly(MODELS, BAD_MODELS), st.text(max_size=20).filter(lambda _: True))


def gpu_arg() -> st.SearchStrategy[str]:
    return mostly(GPUS, BAD_GPUS)


GOOD_INTS = ("1", "2", "4", "8", "16", "64", "100", "512", "1000", "4096")


def json_flag() -> st.SearchStrategy[list[str]]:
    return st.sampled_from([["--json"], ["--json"], []])


ENGINE = {"-tp": (*INTS[:10], "3", "6", "16", "abc"), "-pp": ("1", "2", "4", "0", "65536"),
          "--kv-cache-dtype": KV_DTYPES, "--block-size": ("1", "8", "16", "32", "7", "0", "-16"),
          "--max-model-len": INTS, "--gpu-memory-utilization": FLOATS,
          "--max-num-seqs": INTS, "--max-num-batched-tokens": INTS, "--dtype": DTYPES,
          "--quantization": QUANTS, "--kv-cache-memory": SIZES, "--mamba-cache-dtype": MAMBA,
          "--mamba-ssm-cache-dtype": MAMBA}


@st.composite
def cache_args(draw: st.DrawFn) -> Case:
    """kv, request, batch, levers, models, gpus and the top level."""
    cmd = draw(st.sampled_from(("kv", "request", "batch", "levers", "models", "gpus", "top")))
    if cmd == "top":
        return Case(tuple(draw(st.sampled_from((["--help"], [], ["nope"], ["kv"], ["kv", "--help"],
                                                ["--version"], ["simulate", "--help"])))))
    if cmd in ("models", "gpus"):
        return Case((cmd, *draw(json_flag())))
    opts: dict[str, tuple[str, ...]] = {"--kv-cache-dtype": KV_DTYPES,
                                        "-tp": ENGINE["-tp"]}
    if cmd == "kv":
        opts["--block-size"] = ENGINE["--block-size"]
    if cmd == "request":
        opts |= {"--prompt": INTS, "--output": INTS, "--chunk": INTS,
                 "--block-size": ENGINE["--block-size"]}
    if cmd in ("batch", "levers"):
        opts = {"--batch": INTS, "--context": INTS} | (opts if cmd == "batch" else {})
    required = {"request": ["--prompt", "100", "--output", "10"],
                "batch": ["--batch", "4", "--context", "1000"],
                "levers": ["--batch", "4", "--context", "1000"]}.get(cmd, [])
    keep = draw(st.booleans())
    return Case((cmd, draw(model_arg()), *(required if keep else []), *draw(flags(opts)),
                 *draw(json_flag())))


@st.composite
def capacity_args(draw: st.DrawFn) -> Case:
    """capacity with its flags, or a pasted ``-- vllm serve ...`` line."""
    head = ["capacity", "--gpu", draw(gpu_arg())]
    if draw(st.booleans()):
        return Case((*head, draw(model_arg()), *draw(flags(ENGINE, 5)), *draw(json_flag())))
    pasted_opts = ENGINE | {"--port": ("8000",), "--enforce-eager": ("",),
                            "--data-parallel-size": ("2",), "--cpu-offload-gb": ("4",),
                            "--trust-remote-code": ("",), "--enable-prefix-caching": ("",),
                            "--no-enable-chunked-prefill": ("",), "--model": MODELS}
    serve = [draw(st.sampled_from(["vllm serve", "python -m vllm.entrypoints.openai.api_server",
                                   "vllm", ""]))]
    pasted = [w for w in " ".join(serve).split() if w]
    tail = [a for a in draw(flags(pasted_opts, 6)) if a]
    return Case((*head, *draw(json_flag()), "--", *pasted, draw(st.sampled_from(MODELS)), *tail))


LATENCY = {"--batch": INTS, "-tp": ENGINE["-tp"], "-pp": ENGINE["-pp"],
           "--kv-cache-dtype": KV_DTYPES, "--dtype": DTYPES, "--quantization": QUANTS,
           "--max-num-batched-tokens": INTS}
SWEEPS = ("batch=1,8,64", "batch=1,2147483648", "prompt=128,4096", "output=1,16",
          "kv-cache-dtype=auto,fp8,nope", "tensor-parallel-size=1,2,3,4", "batch=",
          "max-num-batched-tokens=256,2048", "nope=1", "batch=1,abc", "=", "batch=0,-1",
          "output=" + ",".join(map(str, range(1, 40))), "prompt=100000000")


@st.composite
def latency_args(draw: st.DrawFn) -> Case:
    """latency with its flags, with or without --sweep."""
    argv = ["latency", draw(mostly(MODELS, BAD_MODELS)), "--gpu", draw(gpu_arg()),
            "--prompt", draw(mostly(GOOD_INTS, INTS)), "--output",
            draw(mostly(GOOD_INTS, INTS))]
    if draw(st.booleans()):
        argv += ["--sweep", draw(st.sampled_from(SWEEPS))]
    return Case((*argv, *draw(flags(LATENCY)), *draw(json_flag())))


SIM = {"-tp": ("1", "2", "4", "3"), "--kv-cache-dtype": KV_DTYPES[:6],
       "--max-model-len": ("512", "2048", "8k", "0", "abc", "100000000"),
       "--max-num-seqs": ("1", "2", "8", "256", "0"),
       "--max-num-batched-tokens": ("16", "512", "2048", "8192", "1", "0"),
       "--kv-cache-memory": ("64MiB", "1GiB", "1KiB", "1e30", "1e309", "0"),
       "--random-input-len": ("1", "16", "128", "1024", "0", "-5", "100000000"),
       "--random-output-len": ("1", "8", "64", "0"), "--random-range-ratio": FLOATS[:10],
       "--random-prefix-len": ("0", "16", "512", "-1", "99999999"),
       "--request-rate": ("inf", "1", "10", "1000", "0", "-1", "nan", "abc", "1e309"),
       "--burstiness": ("1", "0.5", "0", "-1", "nan", "inf"),
       "--max-concurrency": ("1", "4", "0", "-1"), "--seed": ("0", "1", "-1", "2147483648"),
       "--time-scale": ("1", "0.5", "0", "-1", "inf", "nan"),
       "--dataset": DATASETS, "--goodput": ("ttft:500", "tpot:50", "e2el:0", "ttft:-1",
                                            "nope:5", "ttft", "ttft:nan", "ttft:inf", ":"),
       "--percentile-metrics": ("ttft,tpot,itl,e2el", "ttft", "", "nope", "ttft,,tpot"),
       "--metric-percentiles": ("99", "50,90,99", "0", "100", "101", "-1", "nan", "", "x"),
       "--no-enable-prefix-caching": ("",), "--no-enable-chunked-prefill": ("",)}


@st.composite
def simulate_args(draw: st.DrawFn) -> Case:
    """simulate with a few small requests and any of its flags."""
    n = draw(st.sampled_from((*SMALL, "0", "-1", "abc")))
    argv = ["simulate", draw(st.one_of(st.sampled_from(MODELS[:4]), st.sampled_from(BAD_MODELS))),
            "--gpu", draw(gpu_arg()), "--num-prompts", n,
            *[a for a in draw(flags(SIM, 5)) if a]]
    return Case((*argv, *draw(json_flag())))


PLAN = {"-tp": ("1", "1,2", "2,4", "3", "0", "", "1,,2", "abc"), "--kv-cache-dtype":
        ("auto", "auto,fp8", "fp8", "nope", ""), "--max-num-seqs": ("default", "8,64", "0", "x"),
        "--quantization": ("none", "fp8", "none,fp8", "int3"), "--replicas": ("auto", "1", "2",
                                                                              "0", "-1", "x"),
        "--router": ("round-robin", "least-outstanding", "prefix-affinity", "nope"),
        "--max-gpus": ("1", "4", "0", "-1"), "--max-cost-per-hour": ("10", "0.01", "0", "-1",
                                                                     "nan"),
        "--slo": ("ttft:p99:2000", "tpot:p90:50", "ttft:p99:1", "e2el:p50:100000", "ttft:99:x",
                  "nope", "ttft:p101:5", ""),
        "--goodput-target": ("0.99", "0.5", "0", "1.5", "nan"),
        "--warmup-fraction": ("0.1", "0", "0.99", "1", "-1"),
        "--provider": ("lambda", "runpod-secure", "nope"),
        "--price": ("H100=2.5", "H100=0", "H100=-1", "Z80=1", "H100", "H100=nan"),
        "--search": ("funnel", "exhaustive", "nope"), "--executor": ("local", "nope"),
        "-dp": ("1", "2", "1,2", "0", "1,x", ""), "--enable-expert-parallel": ("on", "off",
                                                                               "on,off", "x"),
        "--max-model-len": ("4k", "2048", "0", "8x"), "--block-size": ("16", "32", "7"),
        "--enable-prefix-caching": ("on", "off", "on,off", "maybe"),
        "--request-rate": ("1", "5", "0", "-1", "inf", "nan")}
REPORT = {"--gpu": GPUS[:3], "--prompt": ("128", "0", "-1", "100000000"),
          "--output": ("16", "0"), "--batch": ("1", "4", "0"), "-tp": ("1", "2", "3"),
          "--max-model-len": ("4k", "0")}


@st.composite
def plan_args(draw: st.DrawFn) -> Case:
    """plan over a small space (few requests), prices, and (rarely: it is slow) report."""
    cmd = draw(st.sampled_from(("plan",) * 8 + ("prices", "report")))
    if cmd == "prices":
        return Case(("prices", *draw(flags({"--provider": PLAN["--provider"],
                                            "--price": PLAN["--price"]}, 2)),
                     *draw(json_flag())))
    if cmd == "report":  # a whole report takes seconds: only its argument checks here
        out = draw(st.sampled_from(("outdir", "no/such/r.html", "r.txt", "f.html/r.html")))
        return Case(("report", draw(mostly(MODELS[:3], BAD_MODELS)), "-o", out,
                     *draw(flags(REPORT, 2))), dirs=("outdir",))
    head = ["plan", draw(mostly(MODELS[:3], BAD_MODELS)), "--gpu",
            draw(mostly(("H100", "H100,A100-40GB-SXM"), ("Z80", "", "H100,,L4"))),
            "--num-prompts", draw(mostly(("20", "30"), ("0", "-1", "100000000"))),
            "--sample-requests", draw(st.sampled_from(("20", "20", "0")))]
    slo = draw(st.sampled_from((["--slo", "ttft:p99:5000"], ["--slo", "tpot:p90:100"],
                                ["--goodput", "ttft:3000"], [])))
    return Case((*head, *slo, *[a for a in draw(flags(PLAN, 4)) if a], *draw(json_flag())))


def _mutate(config: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    out = dict(config)
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from([*sorted(out), "text_config", "num_hidden_layers",
                                    "layer_types", "sliding_window"]))
        if draw(st.integers(0, 4)) == 0:
            out.pop(key, None)
        else:
            out[key] = draw(st.sampled_from(JSON_VALUES))
    return out


CONFIG_CMDS = (("kv", "config.json", "--json"), ("capacity", "config.json", "--json"),
               ("latency", "config.json", "--gpu", "H100", "--prompt", "128", "--output", "8",
                "--json"), ("simulate", "config.json", "--num-prompts", "3", "--json"),
               ("batch", "config.json", "--batch", "2", "--context", "100"),
               ("request", "config.json", "--prompt", "64", "--output", "4", "--json"),
               ("levers", "config.json", "--batch", "2", "--context", "100", "--json"))


@st.composite
def config_mutations(draw: st.DrawFn) -> Case:
    """A bundled config.json with one to three fields deleted or replaced."""
    base = json.loads(_catalog_file(draw(st.sampled_from(MODELS))))
    text = json.dumps(_mutate(base, draw)).encode()
    return Case(draw(st.sampled_from(CONFIG_CMDS)), files=(("config.json", text),))


BROKEN = (b"", b"{", b"[]", b"null", b"42", b'{"a": 1}', b"\xff\xfe{}", b"\xef\xbb\xbf{}",
          b"[" * 100_000 + b"]" * 100_000, b'{"num_hidden_layers": ' + b"9" * 5000 + b"}",
          b"NaN", b'{"hidden_size": NaN}', b'{"model_type": "llama"', b"\x00" * 64,
          b'{"architectures": ["LlamaForCausalLM"]}', b"{'single': 'quotes'}")


@st.composite
def config_files(draw: st.DrawFn) -> Case:
    """Broken config files: bad JSON, encodings, nesting, folders, links."""
    kind = draw(st.sampled_from(("content", "content", "dir", "emptydir", "link", "truncated",
                                 "whole")))
    cmd = list(draw(st.sampled_from(CONFIG_CMDS)))
    if kind == "dir":
        cmd[1] = "m"
        return Case(tuple(cmd), files=(("m/config.json", draw(st.sampled_from(BROKEN))),))
    if kind == "emptydir":
        cmd[1] = "m"
        return Case(tuple(cmd), dirs=("m",))
    if kind == "link":
        return Case(tuple(cmd), links=(("config.json", "missing.json"),))
    data = draw(st.sampled_from(BROKEN))
    if kind in ("truncated", "whole"):
        full = _catalog_file(draw(st.sampled_from(MODELS)))
        data = full if kind == "whole" else full[: draw(st.integers(0, len(full)))]
    return Case(tuple(cmd), files=(("config.json", data),))


TRACE_LAYOUTS = (  # header, a good row's cells (arrival first where there is one)
    ("timestamp,input_length,output_length", ("{t}", "{n}", "{m}")),
    ("TIMESTAMP,ContextTokens,GeneratedTokens", ("2023-11-16 18:17:0{d}.5", "{n}", "{m}")),
    ("timestamp,input_length,output_length,hash_ids", ("{t}", "{n}", "{m}", "1 2")),
    ("input_length,output_length", ("{n}", "{m}")),
    ("arrival,input,output", ("{t}", "{n}", "{m}")),
    ("a,b,c", ("{t}", "{n}", "{m}")),
    ("", ()),
)
CELLS = ("0", "-1", "1.5", "nan", "inf", "x", "", "1e400", "99999999999", "0.001",
         "2023-11-16 18:17:03.97")


@st.composite
def _trace_row(draw: st.DrawFn, good: tuple[str, ...], i: int) -> str:
    cells = [c.format(t=i * 0.1, d=i % 10, n=draw(st.sampled_from(("1", "16", "100", "700"))),
                      m=draw(st.sampled_from(("1", "4", "20")))) for c in good]
    if cells and draw(st.integers(0, 5)) == 0:  # one broken cell, or a cell too many or few
        j = draw(st.integers(0, len(cells) - 1))
        cells[j] = draw(st.sampled_from(CELLS))
        cells = draw(st.sampled_from((cells, cells[:-1], [*cells, "9"])))
    return ",".join(cells)


@st.composite
def trace_files(draw: st.DrawFn) -> Case:
    """A CSV trace for --trace, with or without --trace-columns."""
    header, good = draw(st.sampled_from(TRACE_LAYOUTS))
    rows = [draw(_trace_row(good, i)) for i in range(draw(st.integers(0, 8)))]
    text = "\n".join([header, *rows]).encode()
    argv = ["simulate", "meta-llama/Llama-3.2-1B", "--trace", "t.csv",
            *draw(st.sampled_from(([], [], ["--num-prompts", "2"], ["--num-prompts", "50"]))),
            *draw(st.sampled_from(([], ["--request-rate", "5"])))]
    columns = {"a,b,c": "arrival=a,input=b,output=c",
               "arrival,input,output": "arrival=arrival,input=input,output=output"}.get(header)
    if columns or draw(st.integers(0, 3)) == 0:
        argv += ["--trace-columns", draw(mostly((columns or "input=input_length,"
                                                 "output=output_length",), (
            "arrival=timestamp,input=input_length,output=output_length", "input=a,output=b",
            "x=y", "", "input=nope", "arrival=a,arrival=b")))]
    return Case((*argv, *draw(json_flag())), files=(("t.csv", text),))


GPU_VALUES = (0, -1, 1, 80, 3.35, 989, 1e-9, 1e9, 1e30, "x", None, "80", [], 2**63)


@st.composite
def gpu_files(draw: st.DrawFn) -> Case:
    """A GPU description (YAML or JSON) for --gpu."""
    entry: dict[str, Any] = {"id": "MyGPU", "memory_gb": 80, "mem_bw_tbps": 3.35,
                             "bf16_tflops_dense": 989}
    keys = [*sorted(entry), "fp8_tflops_dense", "interconnect"]
    for key in draw(st.lists(st.sampled_from(keys), max_size=3)):
        if draw(st.booleans()):
            entry.pop(key, None)
        else:
            entry[key] = draw(st.sampled_from(GPU_VALUES))
    name = draw(st.sampled_from(("gpu.yaml", "gpu.json", "gpu.yml")))
    body = json.dumps(entry) if name.endswith("json") else "\n".join(
        f"{k}: {json.dumps(v)}" for k, v in entry.items())
    if draw(st.integers(0, 6)) == 0:
        body = draw(st.sampled_from(("", "- a\n- b", "id: [", ":", "null", "{}")))
    cmd = draw(st.sampled_from((
        ("capacity", "meta-llama/Llama-3.2-1B", "--gpu", name, "--json"),
        ("latency", "meta-llama/Llama-3.2-1B", "--gpu", name, "--prompt", "128", "--output", "8",
         "--json"),
        ("simulate", "meta-llama/Llama-3.2-1B", "--gpu", name, "--num-prompts", "3", "--json"))))
    return Case(cmd, files=((name, body.encode()),))


@st.composite
def profile_files(draw: st.DrawFn) -> Case:
    """A latency profile JSON for --profile (the bundled one, mutated)."""
    prof = _default_profile()
    target = prof["default"] if draw(st.booleans()) else prof["profiles"][0]
    for key in draw(st.lists(st.sampled_from([*sorted(target), "schema", "profiles"]),
                             max_size=3)):
        value = draw(st.sampled_from((0, -1, 0.5, 1, 2, 1e9, 1e-12, "x", None, [], 1e308)))
        (prof if key in ("schema", "profiles") else target)[key] = value
    body = json.dumps(prof).encode()
    if draw(st.integers(0, 6)) == 0:
        body = draw(st.sampled_from((b"", b"{", b"[]", b'{"schema": "kvplan-profile/1"}')))
    cmd = draw(st.sampled_from((
        ("latency", "meta-llama/Llama-3.2-1B", "--gpu", "H100", "--prompt", "128", "--output",
         "8", "--profile", "p.json", "--json"),
        ("simulate", "meta-llama/Llama-3.2-1B", "--num-prompts", "3", "--profile", "p.json",
         "--json"))))
    return Case(cmd, files=(("p.json", body),))


POINT_VALUES = ("1", "8", "512", "64", "12", "0", "-1", "nan", "inf", "x", "", "2147483648",
                "1e9", "0.5")


@st.composite
def calibrate_inputs(draw: st.DrawFn) -> Case:
    """Measurement files for calibrate: CSV, JSON points, vllm bench serve/latency JSON."""
    kind = draw(st.sampled_from(("csv", "json", "serve", "latency", "options")))
    row = {"model": "meta-llama/Llama-3.2-1B", "gpu": "H100", "batch": "1", "prompt": "512",
           "output": "64", "ttft_ms": "12", "tpot_ms": "3"}
    keys = [*sorted(row), "pipeline_parallel_size", "tensor_parallel_size"]
    for key in draw(st.lists(st.sampled_from(keys), max_size=3)):
        row[key] = draw(st.sampled_from((*POINT_VALUES, "Z80", "nope/nope")))
    if kind in ("csv", "options"):
        rows = [row] * draw(st.integers(0, 3))
        text = ",".join(row) + "\n" + "\n".join(",".join(r.values()) for r in rows)
        name = "m.csv"
    elif kind == "json":
        text, name = json.dumps([row] * draw(st.integers(0, 3))), "m.json"
    elif kind == "serve":
        text = json.dumps({"model_id": "meta-llama/Llama-3.2-1B", "mean_ttft_ms": 10,
                           "completed": draw(st.sampled_from((0, 1, 100, -1))),
                           "total_input_tokens": 1000,
                           "total_output_tokens": draw(st.sampled_from((1, 100, 2**31, -5))),
                           "max_concurrency": draw(st.sampled_from((1, 8, None, 0)))})
        name = "bench.json"
    else:
        text, name = json.dumps({"avg_latency": draw(st.sampled_from((0.5, 0, -1, 1e9)))}), "l.json"
    opts = {"--gpu": (*GPUS, "Z80"), "--model": (*MODELS[:2], "x"), "--batch": INTS[:12],
            "--prompt": INTS[:12], "--output": INTS[:12], "-tp": ("1", "2", "0")}
    extra = draw(flags(opts, 4 if kind == "options" else 2))
    return Case(("calibrate", name, *extra, *draw(json_flag())), files=((name, text.encode()),))


OUT_PATHS = ("out.json", "out.svg", "out.html", "outdir", "no/such/dir/x.json", "f.txt/x.json",
             "/dev/full", "dangling.json", "x" * 300 + ".json", "in.csv", "config.json",
             "p.json", "gpu.yaml", "out.txt", "", ".", "outdir/", "m.csv")


@st.composite
def output_paths(draw: st.DrawFn) -> Case:
    """--save-result / --plot / --out / calibrate --out targets, good and bad."""
    files = (("config.json", _catalog_file("meta-llama/Llama-3.2-1B")),
             ("f.txt", b"a regular file"), ("p.json", json.dumps(_default_profile()).encode()),
             ("gpu.yaml", b"id: MyGPU\nmemory_gb: 80\nmem_bw_tbps: 3.35\nbf16_tflops_dense: 989\n"),
             ("m.csv", b"model,gpu,batch,prompt,output,ttft_ms\n"
                       b"meta-llama/Llama-3.2-1B,H100,1,512,64,12\n"),
             ("in.csv", b"input_length,output_length\n100,10\n200,20\n"))
    path = draw(st.sampled_from(OUT_PATHS))
    which = draw(st.sampled_from(("save", "plot", "both", "request", "calibrate")))
    model = draw(st.sampled_from(("config.json", "meta-llama/Llama-3.2-1B")))
    sim = ["simulate", model, "--num-prompts", "3", "--gpu", draw(st.sampled_from(("H100",
                                                                                  "gpu.yaml"))),
           *draw(st.sampled_from(([], ["--profile", "p.json"], ["--trace", "in.csv"])))]
    plot = draw(st.sampled_from(("out.html", "out.svg", path)))
    argv = {"save": [*sim, "--save-result", path], "plot": [*sim, "--plot", path],
            "both": [*sim, "--save-result", path, "--plot", plot],
            "request": ["request", model, "--prompt", "100", "--output", "5", "--plot", path],
            "calibrate": ["calibrate", "m.csv", "--out", path]}[which]
    return Case((*argv, *draw(json_flag())), files=files, dirs=("outdir",),
                links=(("dangling.json", "nowhere/missing.json"),))


FAMILIES: dict[str, st.SearchStrategy[Case]] = {
    "args: kv/request/batch/levers/models/gpus/top": cache_args(),
    "args: capacity (flags and pasted vllm serve)": capacity_args(),
    "args: latency (and --sweep)": latency_args(),
    "args: simulate": simulate_args(),
    "args: plan, prices, report": plan_args(),
    "config.json field mutations": config_mutations(),
    "config.json files (broken, dirs, links)": config_files(),
    "trace CSV (--trace, --trace-columns)": trace_files(),
    "GPU files (--gpu FILE)": gpu_files(),
    "latency profiles (--profile)": profile_files(),
    "calibration inputs": calibrate_inputs(),
    "output paths": output_paths(),
}


OUTPUT_FLAGS = ("--save-result", "--plot", "--out")


def _named_inputs(argv: tuple[str, ...]) -> set[str]:
    """Arguments that are not the value of an output flag (so may name an input file)."""
    return {a for i, a in enumerate(argv) if i == 0 or argv[i - 1] not in OUTPUT_FLAGS}


def materialize(case: Case, root: Path) -> list[Path]:
    """Create the case's folders, files and links under ``root``; return the input files:
    those the command names (or whose folder it names)."""
    for d in case.dirs:
        (root / d).mkdir(parents=True, exist_ok=True)
    inputs = []
    for name, data in case.files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        named = _named_inputs(case.argv)
        if name in named or name.split("/", 1)[0] in named:
            inputs.append(path)
    for name, target in case.links:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).symlink_to(target)
    for name in case.fifos:
        os.mkfifo(root / name)
    for name, existing in case.hardlinks:
        os.link(root / existing, root / name)
    for folder in case.watch:
        inputs += [p for p in sorted((root / folder).rglob("*"))
                   if p.is_file() and not p.is_symlink() and p not in inputs]
    return inputs
