"""Data layer: validated annotation sets, channels, score bins/groups and sufficient statistics."""
from .annotations import AnnotationSet
from .binning import DEFAULT_GROUPS, Binning, as_binning, bin_index, groups_from_int, resolve_groups
from .channel import Channel
from .compress import PatternCounts, all_patterns, compress_patterns, grid_patterns, pad_patterns, padded_size
from .responses import Responses
from .outofcore import SufficientStats, read_stats_csv, read_stats_parquet, stats_from_chunks, stats_from_dask

__all__ = ["DEFAULT_GROUPS", "AnnotationSet", "Binning", "Channel", "PatternCounts", "Responses", "SufficientStats", "all_patterns", "as_binning",
           "bin_index", "compress_patterns", "groups_from_int", "grid_patterns", "pad_patterns", "padded_size", "read_stats_csv", "read_stats_parquet", "resolve_groups",
           "stats_from_chunks", "stats_from_dask"]
