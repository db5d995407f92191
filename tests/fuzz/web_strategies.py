"""Generators for the web API's bodies: JSON for the job endpoints (fields of wrong types,
unknown fields, nesting, garbage, sizes around the 2 MiB cap) and config.json uploads (mutated
catalog configs, broken files, broken multipart), each sent with or without Content-Length.

Each strategy yields a ``WebCase``: one request, plus the GETs to make with the upload's token
when the upload is accepted. Simulations stay small, so thousands of examples run in minutes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.strategies import BROKEN, GPUS, JSON_VALUES, MODELS

CAP = 2 * 2**20
"""The server's body cap (WebSettings.max_body_bytes)."""
SIZES = (CAP - 64, CAP, CAP + 1, CAP + 4096, 3 * 2**20)
NESTING = (50, 900, 1_100, 5_000, 100_000)
WRONG: tuple[Any, ...] = (*JSON_VALUES, 10**40, -(10**40), 1e-320, "nan", "inf", "-1", "1e309",
                          " 5", "x" * 300, [[[]]], {"model": MODELS[0]},
                          "\u0663\u0660", "\x00", "../../etc/passwd", "upload:0000")
GOOD: dict[str, tuple[Any, ...]] = {
    "model": (*MODELS[:3], "upload:0000", "", "nope/nope"),
    "gpu": (*GPUS[:3], "/etc/gpu.yaml", "H100,L4"),
    "num_prompts": (1, 2, 3, 5), "random_input_len": (16, 64, 128), "random_output_len": (1, 4),
    "request_rate": (1.0, 50.0, None), "dataset": ("random", "azure-conv", "nope"),
    "kv_cache_dtype": ("auto", "fp8", "int3"), "tensor_parallel_size": (1, 2, "1", "1,2"),
    "slo": ("ttft:p99:2000 tpot:p99:100", "fast", "ttft:p99:1e308", ""),
    "max_model_len": (256, 1024, 0), "block_size": (16, "16", 7),
    "goodput": ("ttft:100", "x:1"), "seed": (0, 1, -1),
    "disagg": ("1P1D", "2P1D", "0P1D", "PD", True), "kv_link": ("ib-ndr", "eth-100g", "x"),
    "decode_tp": (1, 2, 3), "data_parallel_size": ("1", "1,2", "0"),
    "enable_expert_parallel": ("on", "on,off", "x"),
}
SIM_FIELDS = ("model", "gpu", "tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype",
              "dtype", "quantization", "max_num_batched_tokens", "gpu_memory_utilization",
              "max_model_len", "block_size", "max_num_seqs", "kv_cache_memory",
              "enable_prefix_caching", "dataset", "num_prompts", "random_input_len",
              "random_output_len", "random_range_ratio", "request_rate", "burstiness",
              "max_concurrency", "seed", "time_scale", "goodput", "percentile_metrics",
              "metric_percentiles", "slo", "router", "search", "slo_margin", "provider",
              "token", "trace", "prices", "unknown_field", "disagg", "prefill_gpu",
              "decode_gpu", "prefill_tp", "decode_tp", "kv_link", "data_parallel_size",
              "enable_expert_parallel")
CONTENT_TYPES = ("application/json", "application/json", "application/json", None,
                 "text/plain", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=x", "application/json; charset=latin-1")


@dataclass(frozen=True, repr=False)
class WebCase:
    method: str
    path: str
    body: bytes
    content_type: str | None
    chunked: bool
    """Sent as a stream (Transfer-Encoding: chunked, no Content-Length)."""
    then: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    """GETs to make with ``model`` = the upload's token, when the upload is accepted."""

    def __repr__(self) -> str:  # hypothesis prints the failing case: not 3 MB of it
        body = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        return (f"WebCase({self.method} {self.path}, {len(self.body)} bytes {body!r}, "
                f"content_type={self.content_type!r}, chunked={self.chunked}, "
                f"then={self.then!r})")


def _value(draw: st.DrawFn, name: str) -> Any:
    good = GOOD.get(name, ())
    if good and draw(st.integers(0, 2)):
        return draw(st.sampled_from(good))
    return draw(st.sampled_from(WRONG))


def _nested(n: int, opener: bytes = b"[") -> bytes:
    """``n`` arrays (``[[[...]]]``) or objects (``{"a":{"a":...1}}``) one inside the other."""
    if opener == b"[":
        return b"[" * n + b"]" * n
    return b'{"a":' * n + b"1" + b"}" * n


def _padded(data: bytes, size: int) -> bytes:
    """``data`` (a JSON object) with spaces before its last byte, to ``size`` bytes in all."""
    return data[:-1] + b" " * max(0, size - len(data)) + data[-1:]


@st.composite
def job_bodies(draw: st.DrawFn) -> WebCase:
    """A POST to a job endpoint: fields, nesting, garbage or a body around the cap."""
    path = draw(st.sampled_from(("/api/simulate/jobs", "/api/plan/jobs")))
    kind = draw(st.sampled_from(("good", "fields", "fields", "fields", "nested", "raw", "big")))
    names = draw(st.lists(st.sampled_from(sorted(GOOD) if kind == "good" else SIM_FIELDS),
                          max_size=6, unique=True))
    fields = {n: draw(st.sampled_from(GOOD[n])) if kind == "good" else _value(draw, n)
              for n in names}
    if draw(st.integers(0, 4)):
        fields.setdefault("model", draw(st.sampled_from(MODELS[:3])))
    body = json.dumps(fields).encode()
    if kind == "nested":
        deep = _nested(draw(st.sampled_from(NESTING)), draw(st.sampled_from((b"[", b"{"))))
        body = deep if draw(st.booleans()) else b'{"model": ' + deep + b"}"
    elif kind == "raw":
        body = draw(st.sampled_from((*BROKEN, b'{"num_prompts": NaN}', b'{"seed": 1e999}',
                                     b'{"model": "\xff\xfe"}', b'{"model": "a"}' * 2)))
    elif kind == "big":
        body = _padded(body, draw(st.sampled_from(SIZES)))
    return WebCase("POST", path, body, draw(st.sampled_from(CONTENT_TYPES)), draw(st.booleans()))


def _catalog(model_id: str) -> dict[str, Any]:
    name = model_id.replace("/", "--", 1) + ".json"
    path = resources.files("kvplan.specs.catalog") / "models" / name
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


ABSURD: tuple[Any, ...] = (*JSON_VALUES, 1e30, -1e30, 10**12, 0.0, {"rope_type": "yarn",
                           "factor": 1e30}, {"rope_type": "linear", "factor": -4},
                           {"factor": "x"}, [1] * 1000, "\u00e9" * 100)
KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
        "head_dim", "max_position_embeddings", "rope_scaling", "torch_dtype", "vocab_size",
        "sliding_window", "layer_types", "text_config", "quantization_config", "kv_lora_rank",
        "intermediate_size", "model_type", "architectures", "_name_or_path")
FOLLOW = (("/api/kv", ()), ("/api/levers", (("batch", 2), ("context", 100))),
          ("/api/request", (("prompt", 64), ("output", 4))), ("/api/capacity", ()),
          ("/api/capacity/chart", ()), ("/api/latency", (("prompt", 128), ("output", 8))),
          ("/api/request/chart", (("prompt", 64), ("output", 4))),
          ("/api/simulate", (("num_prompts", 2), ("random_input_len", 32),
                             ("random_output_len", 2))))


def _config(draw: st.DrawFn) -> bytes:
    """A catalog config with one to three fields replaced or dropped, or a broken file."""
    kind = draw(st.sampled_from(("mutated", "mutated", "mutated", "whole", "broken", "nested",
                                 "big")))
    if kind == "broken":
        return draw(st.sampled_from(BROKEN))
    if kind == "nested":
        return _nested(draw(st.sampled_from(NESTING)), draw(st.sampled_from((b"[", b"{"))))
    config = _catalog(draw(st.sampled_from(MODELS)))
    if kind == "mutated":
        for _ in range(draw(st.integers(1, 3))):
            key = draw(st.sampled_from((*sorted(config), *KEYS)))
            if draw(st.integers(0, 4)):
                config[key] = draw(st.sampled_from(ABSURD))
            else:
                config.pop(key, None)
    data = json.dumps(config).encode()
    return _padded(data, draw(st.sampled_from(SIZES))) if kind == "big" else data


@st.composite
def uploads(draw: st.DrawFn) -> WebCase:
    """POST /api/upload: a config.json in a multipart body (sometimes a broken one)."""
    data = _config(draw)
    name = draw(st.sampled_from(("file", "file", "file", "config", "")))
    filename = draw(st.sampled_from(("config.json", "", "x" * 300, "../../config.json",
                                     "\u00e9t\u00e9.json", "a\r\nb.json", "c.json\x00")))
    boundary = "kvplanfuzz"
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{filename}"\r\nContent-Type: application/json\r\n\r\n').encode()
    body = part + data + f"\r\n--{boundary}--\r\n".encode()
    kind = draw(st.sampled_from(("multipart",) * 5 + ("unterminated", "bare")))
    ctype = f"multipart/form-data; boundary={boundary}"
    if kind == "unterminated":
        body = body[: -len(boundary) - 6]
    elif kind == "bare":
        body, ctype = data, draw(st.sampled_from(CONTENT_TYPES))
    follow = draw(st.lists(st.sampled_from(FOLLOW), min_size=1, max_size=3, unique=True))
    gpu = draw(st.sampled_from(GPUS[:3]))
    then = tuple((p, (*q, ("gpu", gpu))) if p.startswith(("/api/capacity", "/api/latency",
                                                           "/api/simulate")) else (p, q)
                 for p, q in follow)
    return WebCase("POST", "/api/upload", body, ctype, draw(st.booleans()), then)


WEB_FAMILIES: dict[str, st.SearchStrategy[WebCase]] = {
    "web: job bodies (fields, nesting, sizes, chunked)": job_bodies(),
    "web: config uploads (and the token's answers)": uploads(),
}
