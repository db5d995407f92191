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


def test_hybrid_request_allocates_in_vllms_raised_block() -> None:
    """Qwen3-Next (TP1): a state page is 1,097,728 B, an attention token 2 heads x 256 x 2 (K,V)
    x 2 B = 2,048 B per layer, so vLLM 0.11 raises the attention block to
    16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens and pads the state page to 544 x 2,048 =
    1,114,112 B (kvplan capacity logs the same). A 1,000-token prompt then holds
    cdiv(1000, 544) = 2 blocks in each of 12 attention layers plus one page in each of 36
    state layers: (24 + 36) x 1,114,112 = 66,846,720 B. Before: blocks of 16 (63 + 1 blocks,
    64,290,816 B)."""
    kv = kv_spec(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"))
    tl = request_timeline(kv, 1000, 1, block_size=16)
    assert tl.block_size == 544
    # vLLM's blocks: 12 layers per KV cache group, so 1 attention group (2 blocks) and 3 state
    # groups (a page each): 5 blocks x 12 layers x 1,114,112 B (hunt 13; was 2 + 1 per spec)
    assert tl.steps[0].allocated_blocks == 2 + 3
    assert tl.steps[0].allocated_bytes == (12 * 2 + 36) * 544 * 2048 == 66_846_720
    assert tl.steps[0].logical_bytes == kv.state_bytes_per_request + 1000 * 24_576


def test_lesson_llama2_70b_is_fp16_by_default() -> None:
    """The lesson's Llama-2-70B is fp16 (meta-llama/Llama-2-70b-hf's config.json:
    torch_dtype float16), so vLLM's --dtype auto and --kv-cache-dtype auto cache fp16. kvplan's
    bundled config came from a bf16 fine-tune and printed bfloat16. The lesson's figures at
    the default dtype: 2 x 80 x 8 x 128 x 2 B = 327,680 B/token; fp16 batch 64 x 4096 =
    327,680 x 4096 x 64 = 85,899,345,920 B = 80 GiB."""
    from tests.conftest import run_cli

    r = run_cli("batch", "meta-llama/Llama-2-70b-hf", "--batch", "64", "--context", "4096",
                "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["kv_cache_dtype"] == "float16"
    assert data["bytes_per_token"] == 327_680 and data["total_bytes"] == 85_899_345_920
    assert load_model("meta-llama/Llama-2-70b-hf").dtype == "float16"
