"""Data layer: validated annotation sets, channels, score bins/groups and sufficient statistics."""
from .annotations import AnnotationSet
from .binning import Binning, as_binning, bin_index, resolve_groups
from .channel import Channel
from .compress import PatternCounts, compress_patterns, pad_patterns, padded_size

__all__ = ["AnnotationSet", "Binning", "Channel", "PatternCounts", "as_binning", "bin_index", "compress_patterns",
           "pad_patterns", "padded_size", "resolve_groups"]
