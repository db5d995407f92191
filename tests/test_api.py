"""The Python API a notebook uses: one import, lazy heavy names, results that agree with the CLI."""

import subprocess
import sys

import kvplan
from tests.conftest import run_cli


def test_import_is_light() -> None:
    code = "import sys, kvplan; print('numpy' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_api_name_loads_on_first_use() -> None:
    """__all__ lists the errors and exactly the lazy names, and each one resolves."""
    errors = {"ConfigError", "DoesNotFitError", "InputError", "KvplanError"}
    assert set(kvplan.__all__) == errors | set(kvplan._LAZY)
    for name in kvplan.__all__:
        assert getattr(kvplan, name) is not None, name
    assert kvplan.load_model("meta-llama/Llama-3.1-8B").name == "meta-llama/Llama-3.1-8B"


def test_capacity_api_matches_cli() -> None:
    model, gpu = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    plan = kvplan.plan_memory(model, gpu, kvplan.EngineConfig(max_model_len=16000))
    cli = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len",
                  "16000", "--json").json()
    assert (plan.num_blocks, plan.kv_cache_tokens) == (cli["num_blocks"], cli["kv_cache_tokens"])


def test_simulate_serving_small_workload() -> None:
    args = kvplan.WorkloadArgs(num_prompts=50, random_input_len=256, random_output_len=32,
                               request_rate=5.0, seed=1)
    run = kvplan.simulate_serving("meta-llama/Llama-3.1-8B", "H100", workload=args)
    metrics = kvplan.compute_metrics(run.result)
    assert metrics.completed == 50
    assert run.header(args)["model_id"] == "meta-llama/Llama-3.1-8B"
    # every request produced its 32 tokens: output throughput x duration = 50 x 32
    assert round(metrics.output_throughput * metrics.duration_s) == 50 * 32
