"""Data generators with explicit seeds (no global random state is touched)."""
from .annotations import (CURVES, MULTICLASS_CURVES, MulticlassSimulation, Simulation, random_confusion,
                          simulate_annotations, simulate_multiclass)
from .crowd import CrowdSimulation, simulate_crowd

__all__ = ["CURVES", "CrowdSimulation", "MULTICLASS_CURVES", "MulticlassSimulation", "Simulation", "random_confusion",
           "simulate_annotations", "simulate_crowd", "simulate_multiclass"]
