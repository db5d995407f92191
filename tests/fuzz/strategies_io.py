"""Generators for the fuzz-3 families: price files, nested JSON wherever JSON is read, Hugging
Face cache layouts with outputs aimed into them, FIFOs and devices as every kind of input, and
a standard output that cannot be written (see strategies.py for ``Case``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.strategies import (
    Case,
    _catalog_file,
    _default_profile,
    cache_args,
    capacity_args,
    json_flag,
    latency_args,
    simulate_args,
)

L1B = "meta-llama/Llama-3.2-1B"
PRICE_COLUMNS = ("gpu", "provider", "instance", "gpus_per_instance", "gpus_per_node",
                 "usd_per_instance_hour", "source_url", "observed_on", "transcribed_by")
PRICE_CELLS: dict[str, tuple[str, ...]] = {  # good values first
    "gpu": ("H100-SXM-80GB", "H100", "A100-40GB-SXM", "L4", "Z80", "", "h100 ", "Ｈ100"),
    "provider": ("me", "lambda", "runpod-secure", "", "x" * 300, "m\u200be"),
    "instance": ("box", "8x H100", "", '"quoted, cell"'),
    "gpus_per_instance": ("1", "8", "0", "-1", "1.5", "\u0663", "1e9", "100000", ""),
    "gpus_per_node": ("1", "8", "0", "72", "4097", "x", ""),
    "usd_per_instance_hour": ("2.5", "19.9", "0", "-1", "1e300", "1e-9", "nan", "inf",
                              "\uff12", "2,5", "", "100000"),
    "source_url": ("https://x", "", "javascript:x"),
    "observed_on": ("2026-01-01", "2025-06-30", "2026-13-01", "yesterday", "", "0001-01-01",
                    "9999-12-31"),
    "transcribed_by": ("me", ""),
}
PRICE_OVERRIDES = ("H100=2.5", "H100=1e300", "H100=1e-9", "H100=\u0663", "H100=10000.1",
                   "H100=0.0001", "L4=0.5", "Z80=1")


@st.composite
def _price_row(draw: st.DrawFn) -> str:
    cells = [draw(st.sampled_from(PRICE_CELLS[col][:2])) for col in PRICE_COLUMNS]
    for _ in range(draw(st.sampled_from((0, 0, 0, 1, 1, 2)))):  # most rows are valid
        i = draw(st.integers(0, len(cells) - 1))
        cells[i] = draw(st.sampled_from(PRICE_CELLS[PRICE_COLUMNS[i]]))
    shape = draw(st.integers(0, 12))
    if shape == 0:
        cells.append("extra")
    elif shape == 1:
        cells.pop()
    elif shape == 2:
        cells[draw(st.integers(0, len(cells) - 1))] = "x" * draw(st.sampled_from((131_073,
                                                                                200_000)))
    elif shape == 3:
        cells[2] = '"a\nb"'
    return ",".join(cells)


@st.composite
def _price_bytes(draw: st.DrawFn) -> bytes:
    header = list(PRICE_COLUMNS)
    if draw(st.integers(0, 5)) == 0:
        header.pop(draw(st.integers(0, len(header) - 1)))
    rows = [draw(_price_row()) for _ in range(draw(st.sampled_from((0, 1, 1, 2, 3, 4))))]
    text = "\n".join([",".join(header), *rows]) + "\n"
    how = draw(st.sampled_from(("utf-8",) * 6 + ("bom", "utf-16", "latin-1", "crlf", "nul",
                                                 "bad-byte", "empty")))
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if how in ("utf-16", "latin-1"):
        return text.encode(how, errors="replace")
    if how == "crlf":
        return text.replace("\n", "\r\n").encode()
    if how == "nul":
        return text.replace(",", "\x00,", 1).encode()
    if how == "bad-byte":
        return b"\x80\x81" + text.encode()
    return b"" if how == "empty" else text.encode()


@st.composite
def price_files(draw: st.DrawFn) -> Case:
    """A --prices CSV (mutated cells, shapes, encodings) for prices or a small plan."""
    data = draw(_price_bytes())
    extra = draw(st.sampled_from(([], ["--provider", "me"], ["--provider", "nope"],
                                  ["--price", draw(st.sampled_from(PRICE_OVERRIDES))])))
    if draw(st.integers(0, 5)) == 0:  # a plan simulates: seconds, so one in six
        argv = ["plan", L1B, "--gpu", "H100", "--num-prompts", "20", "--sample-requests", "20",
                "--slo", "ttft:p99:5000", "-tp", "1", "--prices", "p.csv", "--provider", "me",
                *draw(json_flag())]
    else:
        argv = ["prices", "--prices", "p.csv", *extra, *draw(json_flag())]
    return Case(tuple(argv), files=(("p.csv", data),))


def _nest(depth: int, kind: str) -> str:
    if kind == "array":
        return "[" * depth + "]" * depth
    if kind == "object":
        return '{"a":' * depth + "1" + "}" * depth
    return '[{"a":' * (depth // 2) + "1" + "}]" * (depth // 2)


@st.composite
def _json_text(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """A deeply nested document, or ``base`` with a nested or odd value in one field."""
    depth = draw(st.sampled_from((1, 50, 999, 1_000, 5_000, 100_000, 200_000)))
    nested = _nest(depth, draw(st.sampled_from(("array", "object", "mixed"))))
    if draw(st.booleans()):
        return nested
    key = draw(st.sampled_from(sorted(base) or ["a"]))
    value = draw(st.sampled_from((nested, "9" * 5_000, "NaN", "-Infinity", '"' + "x" * 10_000
                                  + '"', "1e999", "[]", "{}")))
    return json.dumps({**base, key: 0}).replace(f'"{key}": 0', f'"{key}": {value}', 1)


def _bench() -> dict[str, Any]:
    return {"model_id": L1B, "gpu": "H100", "completed": 100, "num_prompts": 100,
            "max_concurrency": 8, "total_input_tokens": 51200, "total_output_tokens": 6400,
            "mean_ttft_ms": 30.0, "mean_tpot_ms": 5.0, "output_throughput": 1000.0}


JSON_INPUTS = {  # kind -> (argv, file name, a valid document of that kind)
    "config": (("kv", "config.json", "--json"), "config.json", "catalog"),
    "config-folder": (("capacity", "m", "--json"), "m/config.json", "catalog"),
    "profile": (("latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "4",
                 "--profile", "p.json", "--json"), "p.json", "profile"),
    "gpu": (("capacity", L1B, "--gpu", "g.json", "--json"), "g.json", "gpu"),
    "bench": (("calibrate", "b.json", "--gpu", "H100", "--json"), "b.json", "bench"),
    "points": (("calibrate", "m.json", "--gpu", "H100", "--json"), "m.json", "points"),
    "plan": (("report", "--plan", "plan.json", "-o", "r.html"), "plan.json", "plan"),
    "hf-cache": (("kv", "acme/Widget", "--json"), "hub/models--acme--Widget/snapshots/abc/"
                 "config.json", "catalog"),
}


def _valid(kind: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "catalog": lambda: json.loads(_catalog_file(L1B)), "profile": _default_profile,
        "gpu": lambda: {"id": "MyGPU", "memory_gb": 80, "mem_bw_tbps": 3.35,
                        "bf16_tflops_dense": 989},
        "bench": _bench, "points": lambda: {"points": [{"model": L1B, "gpu": "H100"}]},
        "plan": lambda: {"schema": "kvplan.plan/v1", "summary": {"status": "ok"}},
    }[kind]()
    return data


@st.composite
def nested_json(draw: st.DrawFn) -> Case:
    """Nested, huge or odd JSON in every kind of JSON input kvplan reads."""
    kind = draw(st.sampled_from(sorted(JSON_INPUTS)))
    argv, name, valid = JSON_INPUTS[kind]
    text = draw(_json_text(_valid(valid)))
    env = (("HF_HUB_CACHE", "{root}/hub"),) if kind == "hf-cache" else ()
    files = ((name, text.encode()),)
    if kind == "hf-cache":
        files += (("hub/models--acme--Widget/refs/main", b"abc"),)
    return Case(argv, files=files, env=env, watch=("hub",) if kind == "hf-cache" else ())


HUB = "hub/models--acme--Widget"
HF_TARGETS = (f"{HUB}/snapshots/abc/config.json", f"{HUB}/blobs/b1", f"{HUB}/refs/main",
              f"{HUB}/snapshots/abc/new.json", f"{HUB}/snapshots/abc", "link.json",
              "hard.json", f"{HUB}/snapshots/abc/config.json.svg", "out.json")


@st.composite
def hf_cache_outputs(draw: st.DrawFn) -> Case:
    """A Hugging Face cache holding acme/Widget (snapshot link -> blob) and an output flag
    aimed at it in every way: the link, the blob, refs, a hard link, a symlink, a folder."""
    target = draw(st.sampled_from(HF_TARGETS))
    model = draw(st.sampled_from(("acme/Widget", "Widget", "acme/widget", L1B)))
    reads_cache = model != L1B  # a catalog id never reads the cache: its files are not inputs
    argv = draw(st.sampled_from((
        ["simulate", model, "--num-prompts", "2", "--save-result", target],
        ["simulate", model, "--num-prompts", "2", "--plot", target],
        ["calibrate", "m.csv", "--model", model, "--out", target],
        ["kv", model, "--plot", target],
        ["request", model, "--prompt", "64", "--output", "4", "--plot", target],
        ["capacity", model, "--plot", target])))
    files = ((f"{HUB}/blobs/b1", _catalog_file(L1B)), (f"{HUB}/refs/main", b"abc"),
             ("m.csv", b"model,gpu,batch,prompt,output,ttft_ms\n" + L1B.encode()
              + b",H100,1,512,64,12\n"))
    links = ((f"{HUB}/snapshots/abc/config.json", "../../blobs/b1"),
             ("link.json", f"{HUB}/snapshots/abc/config.json"))
    return Case((*argv, *draw(json_flag())), files=files, links=links,
                hardlinks=(("hard.json", f"{HUB}/blobs/b1"),),
                env=(("HF_HUB_CACHE", "{root}/hub"),), watch=("hub",) if reads_cache else ())


SPECIAL = ("fifo", "fifo-via-link", "dev-zero", "dev-null", "dev-urandom", "folder",
           "dangling", "loop")
SPECIAL_INPUTS = {  # name of the special file -> argv that reads it
    "c.json": ("kv", "c.json"),
    "d": ("kv", "d"),
    "s.json": ("simulate", "s.json", "--num-prompts", "2"),
    "l.json": ("latency", "l.json", "--gpu", "H100", "--prompt", "64", "--output", "4"),
    "t.csv": ("simulate", L1B, "--trace", "t.csv"),
    "pt.csv": ("plan", L1B, "--gpu", "H100", "--trace", "pt.csv", "--num-prompts", "20",
               "--sample-requests", "20", "--slo", "ttft:p99:5000"),
    "g.yaml": ("capacity", L1B, "--gpu", "g.yaml"),
    "g.json": ("latency", L1B, "--gpu", "g.json", "--prompt", "64", "--output", "4"),
    "p.json": ("latency", L1B, "--gpu", "H100", "--prompt", "64", "--output", "4", "--profile",
               "p.json"),
    "sp.json": ("simulate", L1B, "--num-prompts", "2", "--profile", "sp.json"),
    "prices.csv": ("prices", "--prices", "prices.csv"),
    "pp.csv": ("plan", L1B, "--gpu", "H100", "--num-prompts", "20", "--sample-requests", "20",
               "--slo", "ttft:p99:5000", "--prices", "pp.csv"),
    "m.csv": ("calibrate", "m.csv", "--gpu", "H100"),
    "b.json": ("calibrate", "b.json", "--gpu", "H100"),
    "plan.json": ("report", "--plan", "plan.json", "-o", "r.html"),
    "out.json": ("simulate", L1B, "--num-prompts", "2", "--save-result", "out.json"),
    "out.svg": ("kv", L1B, "--plot", "out.svg"),
}


@st.composite
def special_files(draw: st.DrawFn) -> Case:
    """A FIFO (or a link to one), a device, a folder, a dangling link or a link loop as each
    kind of input (and output)."""
    name = draw(st.sampled_from(sorted(SPECIAL_INPUTS)))
    kind = draw(st.sampled_from(SPECIAL))
    path = "d/config.json" if name == "d" else name
    argv = (*SPECIAL_INPUTS[name], *draw(json_flag()))
    dirs: tuple[str, ...] = ("d",) if name == "d" else ()
    if kind == "fifo":
        return Case(argv, dirs=dirs, fifos=(path,))
    if kind == "fifo-via-link":
        return Case(argv, dirs=dirs, fifos=("pipe",), links=((path, "pipe"),))
    if kind == "folder":
        return Case(argv, dirs=(*dirs, path))
    if kind == "loop":
        return Case(argv, dirs=dirs, links=((path, "loop2"), ("loop2", path)))
    target = {"dev-zero": "/dev/zero", "dev-null": "/dev/null", "dev-urandom": "/dev/urandom",
              "dangling": "nowhere"}[kind]
    return Case(argv, dirs=dirs, links=((path, target),))


STDOUT_ERRORS = ("ENOSPC", "EFBIG", "EIO", "EPIPE")


@st.composite
def unwritable_stdout(draw: st.DrawFn) -> Case:
    """Any kv/capacity/latency/simulate/prices/help run with a standard output that is full,
    over its size limit, broken, or a closed pipe."""
    case = draw(st.one_of(cache_args(), capacity_args(), latency_args(), simulate_args(),
                          st.sampled_from([Case(("prices",)), Case(("prices", "--json")),
                                           Case(("--help",)), Case(("simulate", "--help"))])))
    return replace(case, stdout=draw(st.sampled_from(STDOUT_ERRORS)))


IO_FAMILIES: dict[str, st.SearchStrategy[Case]] = {
    "price files (--prices CSV, --price)": price_files(),
    "nested JSON (every JSON input)": nested_json(),
    "HF cache layouts and outputs into them": hf_cache_outputs(),
    "special files (FIFO, device, folder) as inputs": special_files(),
    "unwritable stdout (full, EFBIG, EIO, closed pipe)": unwritable_stdout(),
}
