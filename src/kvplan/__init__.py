"""kvplan: how much GPU memory the KV cache takes, when it is claimed, what fits, how fast.

Python API (mirrors the CLI)::

    import kvplan
    model = kvplan.load_model("meta-llama/Llama-2-70b-hf")      # or a path to a config.json
    kv = kvplan.kv_spec(model, kv_cache_dtype="fp8", tensor_parallel_size=1)
    kv.bytes_per_token                                            # 163840
    tl = kvplan.request_timeline(kv, 2048, 128)                   # prefill jump + decode trickle
    tl.prefill_share                                              # 0.941...
    kvplan.batch_footprint(kv, 64, 4096).total_bytes              # 42949672960 (40 GiB)
"""

from kvplan.analysis.footprint import batch_footprint, lever_table
from kvplan.analysis.timeline import request_timeline
from kvplan.errors import ConfigError, DoesNotFitError, InputError, KvplanError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.kv import kv_spec, resolve_precision

__all__ = [
    "ConfigError",
    "DoesNotFitError",
    "InputError",
    "KvplanError",
    "batch_footprint",
    "kv_spec",
    "lever_table",
    "load_gpu",
    "load_model",
    "request_timeline",
    "resolve_precision",
]
__version__ = "0.1.0"
