"""Step costs of expert parallelism, data-parallel attention (token exchange, DP padding)
and pipeline parallelism's batch queue (pp_queue)."""
