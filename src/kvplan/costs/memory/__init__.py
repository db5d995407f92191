"""Memory arithmetic as vLLM computes it: parameters and weight formats, KV layer groups,
engine settings, and the memory plan (blocks, GPU KV cache size, maximum concurrency)."""
