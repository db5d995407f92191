"""Disaggregated serving: a prefill pool and a decode pool joined by a KV link, simulated
phase by phase, its metrics, zero-load floors and the disaggregated planner."""
