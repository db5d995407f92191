"""Encoders a multimodal config.json brings beside its language model (vision towers)."""
