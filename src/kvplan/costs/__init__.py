"""Closed-form costs, no clock: kernels/ (measured silicon), memory/ (vLLM's memory arithmetic),
step/ (step times from ops) and pricing (dollars per GPU-hour)."""
