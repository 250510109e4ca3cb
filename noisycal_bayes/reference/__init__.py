"""The paper's frequentist estimators (Hanada & Futami), kept as reference implementations.

Closed forms and moment methods for the channels, Dawid-Skene EM (marginal and score-grouped),
constrained GMM, NC-ECE variants (independent split, reuse, cross-fit) with bootstrap intervals,
corrected-loss and histogram recalibration fits, and the naive baselines; for K classes the top-label and
class-wise NC-ECE (:mod:`.calibration`), their item bootstrap (:mod:`.nc_ece_bootstrap`) and the naive ECEs
(:mod:`.baselines`).
"""
from .baselines import NaiveCalibrationResult, naive_calibration, naive_multiclass_ece
from .calibration import MulticlassNCECE, NCECEResult, classwise_nc_ece, ece, nc_ece, smece, top_label_nc_ece
from .channels import ChannelEstimate
from .confident_learning import ConfidentLearningResult, confident_joint, confident_learning, normalized_margin
from .closed_form import closed_form_two_groups, two_group_from_moments
from .em import em_starts, fit_em
from .gmm import fit_gmm
from .moments import moments_three, three_from_moments
from .nc_ece_bootstrap import (BootstrapMulticlassNCECE, MulticlassBootstrap, bootstrap_classwise_nc_ece,
                               bootstrap_multiclass_nc_ece, bootstrap_top_label_nc_ece)
from .recalibration import fit_platt, fit_projected_histogram, fit_temperature
from .variants import (BootstrapNCECEResult, NCECEVariantResult, bootstrap_nc_ece, nc_ece_cross_fit, nc_ece_reuse,
                       nc_ece_split)

__all__ = [
    "BootstrapMulticlassNCECE", "BootstrapNCECEResult", "ChannelEstimate", "MulticlassBootstrap", "MulticlassNCECE",
    "bootstrap_classwise_nc_ece", "bootstrap_multiclass_nc_ece", "bootstrap_top_label_nc_ece", "classwise_nc_ece",
    "naive_multiclass_ece", "top_label_nc_ece", "ConfidentLearningResult", "confident_joint", "confident_learning",
    "normalized_margin", "NCECEResult", "NCECEVariantResult", "NaiveCalibrationResult",
    "bootstrap_nc_ece", "closed_form_two_groups", "ece", "em_starts", "fit_em", "fit_gmm", "fit_platt",
    "fit_projected_histogram", "fit_temperature", "moments_three", "naive_calibration", "nc_ece", "nc_ece_cross_fit",
    "nc_ece_reuse", "nc_ece_split", "smece", "three_from_moments", "two_group_from_moments",
]
