"""Data layer: validated annotation sets, channels, score bins/groups and sufficient statistics."""
from ..core.calibration import bin_index
from ..core.tables import Responses
from .annotations import PROBS_TOL, AnnotationSet, MulticlassAnnotationSet
from .binning import DEFAULT_GROUPS, Binning, as_binning, groups_from_int, resolve_groups
from .channel import Channel
from .compress import PatternCounts, all_patterns, compress_patterns, grid_patterns, pad_patterns, padded_size
from .design import check_multiclass_design, multiclass_design_problems
from .loaders import is_multiclass_labels, load_multiclass
from .outofcore import SufficientStats, read_stats_csv, read_stats_parquet, stats_from_chunks, stats_from_dask

__all__ = ["DEFAULT_GROUPS", "PROBS_TOL", "AnnotationSet", "Binning", "Channel", "MulticlassAnnotationSet", "PatternCounts", "Responses", "SufficientStats", "all_patterns", "as_binning",
           "bin_index", "check_multiclass_design", "compress_patterns", "groups_from_int", "grid_patterns", "is_multiclass_labels", "load_multiclass",
           "multiclass_design_problems", "pad_patterns", "padded_size", "read_stats_csv", "read_stats_parquet", "resolve_groups",
           "stats_from_chunks", "stats_from_dask"]
