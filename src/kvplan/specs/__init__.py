"""What the user describes: models, hardware, KV precision, serving config, workloads."""
