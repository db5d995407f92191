"""vLLM refuses --dtype float16 for Gemma 2/3 (and plamo2, glm4); kvplan says so in one line."""

from __future__ import annotations

import pytest

from kvplan.costs.memory.settings import FLOAT16_REFUSED
from tests.conftest import assert_one_line_error, run_cli


@pytest.mark.parametrize("model", ["google/gemma-3-27b-it", "google/gemma-2-9b-it"])
@pytest.mark.parametrize("dtype", ["float16", "half", "fp16"])
def test_gemma_in_float16_is_refused(model: str, dtype: str) -> None:
    r = run_cli("capacity", model, "--gpu", "H100", "--dtype", dtype)
    assert_one_line_error(r)
    assert f"--dtype {dtype}" in r.err and "bfloat16" in r.err


def test_other_dtypes_and_models_still_size() -> None:
    assert run_cli("capacity", "google/gemma-2-9b-it", "--gpu", "H100", "--dtype",
                   "bfloat16").code == 0
    assert run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--dtype",
                   "float16").code == 0


def test_the_list_is_vllms() -> None:  # vLLM 0.11 config/model.py _FLOAT16_NOT_SUPPORTED_MODELS
    assert set(FLOAT16_REFUSED) == {"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"}
