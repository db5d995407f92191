"""Step costs of expert parallelism and data-parallel attention (token exchange, DP padding)."""
