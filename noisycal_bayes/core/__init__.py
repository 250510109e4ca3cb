"""Pure formulas on arrays (jax.numpy): no pandas, no NumPyro, nothing else from the package.

Every function here works under ``jax.jit`` and ``jax.vmap`` (e.g. over posterior channel draws).
Computations run in the caller's precision; wrap a call in :func:`x64` for float64. The K-class functions
(confusion matrices) also run in NumPy on NumPy inputs.
"""
from ._x64 import x64
from .calibration import (BinTable, ClasswiseECE, TopLabelECE, binned_abs_residual, bin_table, bin_stats,
                          classwise_ece, ece_from_labels, nc_ece_from_stats, pad_bin_stats, score_groups,
                          top_label_ece)
from .channel import (combine_item_weights, confusion_condition, corrected_labels, corrected_targets,
                      corrected_vectors, item_corrected_label, mean_corrected_label, usable_confusions)
from .em import em_step, multiclass_e_step, multiclass_m_step
from .likelihood import ds_loglik, ds_loglik_rows, pattern_loglik, posterior_positive
from .loss import clipped_logit, corrected_log_loss, platt_map, temperature_map
from .sparse import sparse_multiclass_e_step, sparse_multiclass_m_step
from .tables import BinStats
from .weights import WEIGHT_RULES, annotator_weights, iv_weights, rule_weights

__all__ = [
    "BinStats", "BinTable", "ClasswiseECE", "TopLabelECE", "annotator_weights", "classwise_ece", "confusion_condition",
    "corrected_targets", "corrected_vectors", "multiclass_e_step", "multiclass_m_step", "score_groups",
    "sparse_multiclass_e_step", "sparse_multiclass_m_step", "top_label_ece", "usable_confusions", "WEIGHT_RULES",
    "bin_stats", "bin_table", "binned_abs_residual", "clipped_logit",
    "combine_item_weights", "corrected_labels", "corrected_log_loss", "ds_loglik", "ds_loglik_rows",
    "ece_from_labels", "em_step", "item_corrected_label", "iv_weights", "mean_corrected_label",
    "nc_ece_from_stats", "pad_bin_stats", "pattern_loglik", "platt_map", "posterior_positive", "rule_weights",
    "temperature_map", "x64",
]
