"""What the user sends: workload flags and their bounds, synthetic generators (vllm bench
random), bundled and CSV traces (cached), and the struct-of-arrays Workload."""
