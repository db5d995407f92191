"""Calibration: measured points (public set and user files), the static and serving fits of
engine overheads, separability checks, replay and the leave-one-source-out report."""
