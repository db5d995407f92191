"""Disaggregated prefill/decode fleets: prefill and decode instances joined by a KV link."""
