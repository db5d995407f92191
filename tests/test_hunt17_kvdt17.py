"""Hunt 17, KV-cache precision as a lever (helper kvdt17): --kv-cache-dtype values vLLM 0.11.0
takes or refuses, against kvplan's capacity / latency / pasted `vllm serve` lines."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.test_hunt14_mla import _v32_config


def test_pasted_vllm_line_takes_fp8_ds_mla_as_vllm_0_11_argparse_does(tmp_path: Path) -> None:
    # vLLM 0.11.0 config/cache.py CacheDType = Literal["auto", "bfloat16", "fp8", "fp8_e4m3",
    # "fp8_e5m2", "fp8_inc", "fp8_ds_mla"] (engine-args docs of that release: "Possible
    # choices: auto, bfloat16, fp8, fp8_ds_mla, fp8_e4m3, fp8_e5m2, fp8_inc"). kvplan refused
    # the pasted line ("vllm serve refuses --kv-cache-dtype fp8_ds_mla: invalid choice").
    # DeepSeek-V3.2 at TP8 on H200: the pasted line must give the own-flag answer, where
    # one layer's page is 64 tokens x (656 B fp8_ds_mla latent + 132 B indexer key) = 50,432 B.
    cfg = _v32_config(tmp_path)
    own = run_cli("capacity", cfg, "--gpu", "H200", "-tp", "8", "--kv-cache-dtype",
                  "fp8_ds_mla", "--json")
    pasted = run_cli("capacity", "--gpu", "H200", "--json", "--", "vllm", "serve", cfg,
                     "-tp", "8", "--kv-cache-dtype", "fp8_ds_mla")
    assert own.code == 0, own.err
    assert pasted.code == 0, pasted.err
    assert json.loads(pasted.out) == json.loads(own.out)
    assert json.loads(own.out)["page_size_bytes"] == 64 * (656 + 132) == 50_432
