"""Sane bounds where vLLM has none: each limit is far beyond any real deployment, so a value
past it is a typo or a fuzzer, and is refused at once with the allowed range (never priced).

The numbers and why (README "Limits"):

=========================  ===========================  =====================================
quantity                   allowed                      why
=========================  ===========================  =====================================
tokens (prompt+output)     1 .. 10^8                    longest model contexts are ~10^7
static batch (--batch)     1 .. 2^20 (1,048,576)        vLLM's max_num_seqs is ~10^3
prefill steps priced       10^5 (latency), 2x10^5 in    batch x prompt / token budget;
                           a sweep, 10^3 per calibrate  ~35 us each, a fit prices each
                           point                        point hundreds of times
request timeline steps     10^6 (request: one a chunk   one object each: 10^6 is ~25 s and
                           and one an output token)     ~350 MB
requests (--num-prompts)   1 .. 10^6                    a benchmark run, not a year of traffic
plan search space          10^5 configurations (the     real searches are 10..10^3; each is
                           product of the flag lists)   screened in ~5 ms (10^5: ~8 min)
plan --replicas            1 .. 10,000                  a fleet of 10^4 8-GPU replicas is
                                                        80,000 GPUs; each costs the fleet
                                                        simulation ~25 us (10^8: hours)
plan --workers             4 x the usable CPUs          jobs are CPU-bound (executor.py)
disaggregated fleet, DP    1,024 engines (instances x   real xPyD fleets have < 100; each
                           DP ranks); engines (or DP    engine keeps every request's state
                           ranks) x requests 2x10^7     (~200 B: 2x10^7 is ~4-5 GB)
trace rows read            10^7; 10^6 simulated         (the bundled traces have < 35,000)
layers                     1 .. 1,024                   the largest models have ~130
config integers            1 .. 2^31 - 1                int32 tensor shapes (torch, vLLM)
TP/PP degree               1 .. 4,096                   the largest NVLink/IB domains
KV cache memory            1 B .. 1 PiB                 a GPU has < 1 TiB
GPU memory                 1 GB .. 10,000 GB            (memory_gb in a GPU file)
GPU bandwidth              0.01 .. 1,000 TB/s           (mem_bw_tbps)
GPU dense compute          0.1 .. 100,000 TFLOP/s       (*_tflops_dense)
interconnect               0 .. 100,000 GB/s            (interconnect_gbps)
profile efficiencies       0.01 .. 1                    compute/bandwidth/comm efficiency
profile overheads          0 .. 10 s                    per step / per prefill / all-reduce
request rate               10^-6 .. 10^9 req/s or inf   float timestamps keep ~1 us detail
arrival times (a trace x   0 .. 2^52 us (~4.5x10^9 s,   float seconds keep 1 us detail up to
--time-scale, or drawn)    ~142 years) after the first  2^52 us; past it a step rounds away
measured times             10^-6 .. 10^5 s              calibrate inputs
SLO / goodput limits       0.001 ms .. 24 h (8.64x10^7  no latency target is under 1 us or
                           ms)                          over a day
prices                     $0.0001 .. $10,000 per       GPUs rent for ~$0.1-$15 per GPU-hour
                           GPU-hour
fleet cost cap             $0.0001 .. $10^9 per hour    (--max-cost-per-hour)
rope_scaling factor        0.01 .. 1,024                real ones are 1-64; 1,024 x 128k
                                                        positions is past the token limit
=========================  ===========================  =====================================
"""

from __future__ import annotations

import math
import numbers
import reprlib
from typing import Any

from kvplan.errors import InputError

MAX_TOKENS = 100_000_000
MAX_BATCH = 2**20
MAX_PRICED_STEPS = 100_000
MAX_SWEEP_STEPS = 200_000
MAX_CALIBRATION_STEPS = 1_000
MAX_PROMPTS = 1_000_000
MAX_TRACE_ROWS = 10 * MAX_PROMPTS
MAX_LAYERS = 1024
MAX_CONFIG_INT = 2**31 - 1
MAX_PARALLEL = 4096
MAX_KV_CACHE_BYTES = 2**50
MIN_REQUEST_RATE = 1e-6
MAX_ARRIVAL_SPAN_S = 2**52 * 1e-6
"""The latest arrival (s after the first) a workload may hold: float64 seconds have a spacing
of at most 1 us up to 2^52 us (~142 years); far past it a request's work rounds away (a trace
5e304 s long reported a TTFT of 0)."""
MAX_ARRIVAL_S = MAX_ARRIVAL_SPAN_S
"""The latest arrival a workload may have (its clock starts at 0): the same 1 us bound."""
MAX_REQUEST_RATE = 1e9
MAX_SWEEP_VALUES = 64
MAX_PLAN_CONFIGS = 100_000
MAX_TIMELINE_STEPS = 1_000_000
"""Steps one request's claim schedule lists (`kvplan request`, its web page, the report):
every catalog model's whole context fits; 10^8 steps would be ~35 GB."""
MAX_REPLICAS = 10_000
"""plan --replicas: every fleet run walks every replica (--replicas 10^6 took 2 minutes,
10^8 hours), and no deployment of one model has 10^4 replicas."""
MAX_FLEET_ENGINES = 1024
MAX_FLEET_STATES = 20_000_000
"""A disaggregated fleet's engines x requests (--prefill-instances 100000 with 10 requests
took 7 GB and minutes; 64P64D x 10^6 requests ~27 GB)."""
"""Configurations a plan's flag lists may multiply to (a 3,000 x 3,000 list pair was 9
million: hours of screening, gigabytes of candidates)."""
SLO_LIMIT_MS = (1e-3, 86_400_000.0)
"""An SLO or goodput bound (ms): 1 us .. 24 hours."""
USD_PER_GPU_HOUR = (1e-4, 1e4)
"""A price per GPU-hour (USD) accepted from --price or a price file."""
USD_PER_HOUR_CAP = (1e-4, 1e9)
"""--max-cost-per-hour (USD per hour for the whole fleet)."""
ROPE_FACTOR = (0.01, 1024.0)
"""rope_scaling.factor in a config.json."""
ROPE_VALUE = 1e6
"""Any other number in rope_scaling (beta_fast 32, mscale 0.707, ...): |x| at most this."""

GPU_RANGES: dict[str, tuple[float, float]] = {
    "memory_gb": (1.0, 10_000.0),
    "mem_bw_tbps": (0.01, 1_000.0),
    "fp16_tflops_dense": (0.1, 100_000.0),
    "bf16_tflops_dense": (0.1, 100_000.0),
    "fp8_tflops_dense": (0.1, 100_000.0),
    "int8_tops_dense": (0.1, 100_000.0),
    "fp4_tflops_dense": (0.1, 100_000.0),
    "fp32_tflops_dense": (0.1, 100_000.0),
    "interconnect_gbps": (0.0, 100_000.0),
    "node_gpus": (1.0, 1_024.0),
    "bridge_gpus": (1.0, 1_024.0),
    "mesh_links": (1.0, 1_024.0),
    "pcie_gbps": (0.0, 100_000.0),
    "scale_out_gbps": (0.0, 100_000.0),
}
"""GPU-file fields: (lowest, highest) accepted, in the file's own units."""

PROFILE_RANGES: dict[str, tuple[float, float]] = {
    "compute_eff": (0.01, 1.0),
    "bandwidth_eff": (0.01, 1.0),
    "comm_eff": (0.01, 1.0),
    "step_overhead_s": (0.0, 10.0),
    "prefill_overhead_s": (0.0, 10.0),
    "allreduce_latency_s": (0.0, 10.0),
    "layer_overhead_s": (0.0, 1.0),
    "moe_layer_overhead_s": (0.0, 1.0),
    "request_overhead_s": (0.0, 1.0),
    "api_request_s": (0.0, 10.0),
    "api_prompt_token_s": (0.0, 1.0),
    "api_admission_s": (0.0, 10.0),
}
"""Latency-profile factors: (lowest, highest) accepted."""

MEASURED_S = (1e-6, 1e5)
"""Measured latencies (seconds) calibrate accepts: 1 us .. ~28 hours."""
MEASURED_TOK_S = (1e-3, 1e9)
"""Measured throughput (tokens/s) calibrate accepts."""


def real_number(value: Any) -> float | None:
    """``value`` as a finite float, or None for bools, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_number(name: str, value: Any, low: float, high: float, *, where: str = "") -> float:
    """A finite number in [low, high]; InputError names the field and the range otherwise."""
    number = real_number(value)
    if number is None or not low <= number <= high:
        prefix = f"{where}: " if where else ""
        raise InputError(
            f"{prefix}{name} must be a number in [{low:g}, {high:g}], got {_show(value)}"
        )
    return number


def check_int(name: str, value: Any, low: int, high: int, *, where: str = "") -> int:
    """A whole number in [low, high] (no bools; a numpy integer is one): InputError names the
    field and the range."""
    ok = (isinstance(value, numbers.Integral) and not isinstance(value, bool)
          and low <= int(value) <= high)
    if not ok:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}{name} must be a whole number in [{low:,}, {high:,}], "
                         f"got {_show(value)}")
    return int(value)


def _show(value: Any) -> str:
    """A value for an error message, shortened (a 5,000-digit integer stays one short line)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = bounded_repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bounded_repr(value: Any) -> str:
    """repr() that walks at most 3 levels and 8 items of each list or mapping: a YAML alias
    bomb (9^9 items from 1 KB) took minutes and gigabytes to repr whole."""
    return _SHORT.repr(value)


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 8, 8, 8
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 200, 200, 200
