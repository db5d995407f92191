"""The step model: one engine step's seconds as the sum of its ops (measured kernels, or the
roofline where a GPU has no tables) plus fitted engine overheads; latency from steps."""
