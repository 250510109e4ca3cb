"""Data generators with explicit seeds (no global random state is touched)."""
from .annotations import CURVES, Simulation, simulate_annotations
from .crowd import CrowdSimulation, simulate_crowd
from .multiclass import MULTICLASS_CURVES, MulticlassSimulation, random_confusion, simulate_multiclass

__all__ = ["CURVES", "CrowdSimulation", "MULTICLASS_CURVES", "MulticlassSimulation", "Simulation", "random_confusion",
           "simulate_annotations", "simulate_crowd", "simulate_multiclass"]
