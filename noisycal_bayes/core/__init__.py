"""Pure formulas on arrays (jax.numpy): no pandas, no NumPyro, nothing else from the package.

Every function here works under ``jax.jit`` and ``jax.vmap`` (e.g. over posterior channel draws).
Computations run in the caller's precision; wrap a call in :func:`x64` for float64.
"""
from ._x64 import x64
from .calibration import (BinStats, binned_abs_residual, bin_table, bin_stats, ece_from_labels, nc_ece_from_stats,
                          pad_bin_stats)
from .confusion import (BinTable, ClasswiseECE, TopLabelECE, annotator_weights, classwise_ece, confusion_condition,
                        corrected_targets, corrected_vectors, multiclass_e_step, multiclass_m_step, score_groups,
                        sparse_multiclass_e_step, sparse_multiclass_m_step, top_label_ece, usable_confusions)
from .channel import combine_item_weights, corrected_labels, item_corrected_label, mean_corrected_label
from .em import em_step
from .likelihood import ds_loglik, ds_loglik_rows, pattern_loglik, posterior_positive
from .loss import clipped_logit, corrected_log_loss, platt_map, temperature_map
from .weights import WEIGHT_RULES, iv_weights, rule_weights

__all__ = [
    "BinStats", "BinTable", "ClasswiseECE", "TopLabelECE", "annotator_weights", "classwise_ece", "confusion_condition",
    "corrected_targets", "corrected_vectors", "multiclass_e_step", "multiclass_m_step", "score_groups",
    "sparse_multiclass_e_step", "sparse_multiclass_m_step", "top_label_ece", "usable_confusions", "WEIGHT_RULES", "bin_stats", "bin_table", "binned_abs_residual", "clipped_logit",
    "combine_item_weights", "corrected_labels", "corrected_log_loss", "ds_loglik", "ds_loglik_rows",
    "ece_from_labels", "em_step", "item_corrected_label", "iv_weights", "mean_corrected_label",
    "nc_ece_from_stats", "pad_bin_stats", "pattern_loglik", "platt_map", "posterior_positive", "rule_weights",
    "temperature_map", "x64",
]
