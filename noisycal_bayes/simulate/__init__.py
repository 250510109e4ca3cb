"""Data generators with explicit seeds (no global random state is touched)."""
from .annotations import CURVES, Simulation, simulate_annotations

__all__ = ["CURVES", "Simulation", "simulate_annotations"]
