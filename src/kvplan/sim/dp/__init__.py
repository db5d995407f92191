"""Data-parallel serving: DP engines behind vLLM's load balancer, MoE steps in lockstep."""
