"""hunt9-timeline: a request's claim schedule against vLLM v1's block rules."""

from kvplan import kv_spec, load_model, request_timeline
from kvplan.sim.blocks import kv_shape_from

MISTRAL_TOKEN = 131_072  # 2 x 32 layers x 8 KV heads x 128 x 2 bytes; window 4096 everywhere


def test_sliding_window_prefill_holds_every_block_it_writes() -> None:
    """vLLM's allocate_slots frees sliding-window blocks on the tokens computed *before* the
    step (remove_skipped_blocks(num_computed_tokens): blocks before c - 4096 + 1), then
    allocates up to the step's end: a one-step 8,000-token prefill holds cdiv(8000, 16) = 500
    blocks; the next (decode) step frees (8000 - 4095) // 16 = 244 and adds one: 257.
    Before the fix the prefill step showed 257 - 1 = 256 blocks, as if already trimmed."""
    kv = kv_spec(load_model("mistralai/Mistral-7B-v0.1"))
    tl = request_timeline(kv, 8000, 2)
    assert [s.allocated_blocks for s in tl.steps] == [500, 257, 257]
    assert tl.steps[0].allocated_bytes == 500 * 16 * MISTRAL_TOKEN  # 1,000 MiB
    assert tl.steps[0].logical_bytes == 4096 * MISTRAL_TOKEN  # the window's 512 MiB


def test_sliding_window_chunk_staircase() -> None:
    """Chunks of 2,048 (vLLM's chunked prefill): chunk k frees blocks before c - 4095 with
    c = the tokens the chunks before it computed.
    chunk 3: c = 4096 -> (4096 - 4095) // 16 = 0 freed; cdiv(6144, 16) = 384 held
    chunk 4: c = 6144 -> (6144 - 4095) // 16 = 128 freed; cdiv(8000, 16) - 128 = 372
    decode:  c = 8000 -> 244 freed; cdiv(8001, 16) - 244 = 257."""
    kv = kv_spec(load_model("mistralai/Mistral-7B-v0.1"))
    tl = request_timeline(kv, 8000, 1, chunk_tokens=2048)
    assert [s.allocated_blocks for s in tl.steps] == [128, 256, 384, 372, 257]
    # the same counts as the simulator's block rule (sim/blocks.py, documented in simulator.md)
    shape = kv_shape_from(kv, 16)
    before = [0] + [s.tokens_in_cache for s in tl.steps[:-1]]
    assert [shape.blocks_one(s.tokens_in_cache, c) for s, c in zip(tl.steps, before, strict=True)
            ] == [s.allocated_blocks for s in tl.steps]


def test_web_request_refuses_what_the_cli_refuses() -> None:
    """`kvplan request meta-llama/Llama-2-70b-hf --prompt 4000 --output 200` exits 2: 4,200
    tokens > the model's 4,096 (max_position_embeddings). /api/request answered 200 with a
    schedule; now 422 with the CLI's one line."""
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app

    client = TestClient(create_app())
    params = {"model": "meta-llama/Llama-2-70b-hf", "prompt": 4000, "output": 200}
    for url in ("/api/request", "/api/request/chart"):
        r = client.get(url, params=params)
        assert r.status_code == 422, url
        assert "4,200 tokens exceeds the model's context of 4,096" in r.json()["detail"]


def test_report_too_long_request_names_report_flags(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`kvplan report` has --prompt/--output, no --context: its error named `kvplan batch`'s
    flag ("--context 4,200 exceeds ..."); now the request's own flags, as latency says it."""
    from tests.conftest import assert_one_line_error, run_cli

    r = run_cli("report", "meta-llama/Llama-2-70b-hf", "--prompt", "4000", "--output", "200",
                "--batch", "1", "-o", str(tmp_path / "r.html"))
    assert_one_line_error(r)
    assert "--prompt + --output = 4200 tokens exceeds" in r.err and "--context" not in r.err
    assert not (tmp_path / "r.html").exists()
