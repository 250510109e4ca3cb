"""Which labels are wrong, and which classifier is really better (DESIGN §1, job 5; seeds/003).

Built on the Bayesian layer: every function takes a channel fit (``fit_em``, ``fit_map`` or
``fit_nuts``) and never trusts a single label or the majority vote.

- :func:`item_posteriors`, :func:`annotation_posteriors`: ``P(Y_i = 1 | data)``, ``P(A_ij wrong)``,
  ``P(majority wrong)`` with intervals over the posterior draws.
- :func:`label_issues`: items ranked by ``P(majority wrong)``.
- :func:`corrected_accuracy`: accuracy / error rate of a thresholded classifier on the clean labels.
- :func:`multiclass_label_issues`, :func:`corrected_accuracy_multiclass`: the same for K classes, from the
  clean-label posterior ``P(Y_i = k | data)``.
- :func:`plan_labels`: where the next labels (or gold checks) narrow an interval most, a ranked plan.
- :func:`clean_metrics`: every clean-label metric (sensitivity, specificity, PPV, NPV, F1, AUC, Brier, log loss,
  accuracy; K classes per class and macro) of one or several classifiers, with intervals and paired comparisons.
- :func:`compare_models`: posterior probability that each classifier is the most accurate / best
  calibrated.
"""
from .accuracy import CorrectedAccuracy, MulticlassAccuracy, corrected_accuracy, corrected_accuracy_multiclass
from .compare import ModelComparison, compare_models, comparison_groups, joint_prediction_groups
from .plan import LabelPlan, PlanTarget, plan_labels
from .metrics import CleanMetrics, MetricKernel, clean_metrics
from .issues import annotation_posteriors, default_issue_fit, item_posteriors, label_issues, multiclass_label_issues

__all__ = ["CleanMetrics", "MetricKernel", "clean_metrics", "CorrectedAccuracy", "ModelComparison", "MulticlassAccuracy", "corrected_accuracy_multiclass",
           "multiclass_label_issues", "annotation_posteriors", "compare_models", "comparison_groups",
           "corrected_accuracy",
           "default_issue_fit", "item_posteriors", "joint_prediction_groups", "label_issues",
           "LabelPlan", "PlanTarget", "plan_labels"]
