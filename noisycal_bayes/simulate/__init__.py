"""Data generators with explicit seeds (no global random state is touched)."""
from .annotations import CURVES, Simulation, simulate_annotations
from .crowd import CrowdSimulation, simulate_crowd

__all__ = ["CURVES", "CrowdSimulation", "Simulation", "simulate_annotations", "simulate_crowd"]
