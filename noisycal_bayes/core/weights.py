"""Annotator weight rules (paper §4.4 and Appendix F.4): the one place the inverse-variance recipe lives.

IV: ``sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2`` with ``b_j = a_j + delta_j``
(:func:`annotator_noise_variance`), ``w_j ∝ 1 / max(sigma_j^2, floor)``; ``mu`` clipped to [1e-4, 1 - 1e-4].
Equal ``∝ 1``, Gap ``∝ delta_j``, Squared-gap ``∝ delta_j^2``. Weights are convex over the annotators and are
renormalised per item over the annotators who labelled it where they are used
(:func:`~noisycal_bayes.core.channel.combine_item_weights`). IV needs ``mu``, the clean-label frequency, which
:func:`weights_for_labels` estimates by the equally weighted mean corrected label of the items.

Small and negative gaps (issue 16): every rule multiplies by the mask of
:func:`~noisycal_bayes.core.channel.usable_annotators` (weight 0 where the gap's interval contains 0), the
Gap rule uses ``|delta_j|`` (an adversarial annotator's corrected label is unbiased and informative), and IV
is ``delta_j^2 / [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)]``, which never divides by the gap.
"""
import jax.numpy as jnp

from .._validation import WEIGHT_RULES  # the names live with the check that accepts them
from .channel import item_corrected_label, usable_annotators
from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise

MU_CLIP = 1e-4
# A zero variance (a perfect annotator) would give an infinite weight; the floor keeps weights finite.
VARIANCE_FLOOR = 1e-8


def annotator_noise_variance(fpr, gap, mu):
    """``sigma_j^2 = [mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)] / delta_j^2``: the variance of annotator ``j``'s
    corrected label around the clean label, for clean-label frequency ``mu`` (not clipped, not floored).

    Shapes broadcast: ``fpr``, ``gap`` (..., n_annotators) with ``mu`` (..., 1) or scalar.
    """
    tpr = fpr + gap
    return (mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)) / gap**2


@_eager_jit
def iv_weights(fpr, gap, mu, usable=None):
    """Inverse-variance weights, shape (n_annotators,), summing to 1; 0 for unusable annotators.

    ``1 / sigma_j^2 = gap_j^2 / v_j`` with ``v_j = mu b_j (1 - b_j) + (1 - mu) a_j (1 - a_j)``, the variance
    floored at ``VARIANCE_FLOOR`` as ``1 / max(v_j / gap_j^2, floor)`` (written without dividing by the gap).
    """
    mu = jnp.clip(mu, MU_CLIP, 1 - MU_CLIP)
    tpr = fpr + gap
    v = mu * tpr * (1 - tpr) + (1 - mu) * fpr * (1 - fpr)
    inv = jnp.minimum(gap**2 / jnp.maximum(v, 1e-300), 1.0 / VARIANCE_FLOOR)
    inv = jnp.where(usable_annotators(gap) if usable is None else usable, inv, 0.0)
    return inv / jnp.sum(inv)


@_eager_jit(static_argnames=("rule",))
def rule_weights(rule: str, fpr, gap, mu=None, usable=None):
    """Weights of a named rule (``"iv"`` needs ``mu``), shape (n_annotators,), summing to 1.

    ``usable`` (bool, (n_annotators,)) is :func:`~noisycal_bayes.core.channel.usable_annotators` (default:
    ``gap != 0``); unusable annotators get weight 0 under every rule.
    """
    usable = usable_annotators(gap) if usable is None else jnp.asarray(usable)
    if rule == "iv":
        return iv_weights(fpr, gap, mu, usable)
    if rule == "equal":
        w = jnp.ones_like(gap)
    elif rule == "gap":
        w = jnp.abs(gap)
    elif rule == "squared_gap":
        w = gap**2
    else:
        raise ValueError(f"`weights` must be one of {WEIGHT_RULES} or an array; got {rule!r}.")
    w = jnp.where(usable, w, 0.0)
    return w / jnp.sum(w)


def weights_for_labels(rule, labels, fpr, gap, counts=None, usable=None):
    """Convex annotator weights of ``rule`` at the channel ``(fpr, gap)`` for these items.

    Parameters
    ----------
    rule : str or array of shape (n_annotators,)
        A rule name (IV estimates ``mu`` from ``labels``) or explicit weights (normalised to sum 1).
    labels : array of shape (n_rows, n_annotators), -1 = missing
        Items, or distinct response patterns with ``counts``.
    fpr, gap : arrays of shape (n_annotators,)
    counts : array of shape (n_rows,), optional
        Items per row of ``labels`` (default 1 each).
    usable : bool array of shape (n_annotators,), optional
        :func:`~noisycal_bayes.core.channel.usable_annotators`; default ``gap != 0``.

    Returns
    -------
    array of shape (n_annotators,)

    Notes
    -----
    ``mu`` is the (count-weighted) mean of the equally weighted combined corrected labels (DESIGN §3), then
    :func:`rule_weights`. Pure ``jax.numpy``: works under ``jit`` and ``vmap`` (``rule`` static).
    """
    if not isinstance(rule, str):
        w = jnp.asarray(rule)
        return w / jnp.sum(w)
    return _rule_weights_for_labels(rule, labels, fpr, gap, counts, usable)


@_eager_jit(static_argnames=("rule",))
def _rule_weights_for_labels(rule: str, labels, fpr, gap, counts, usable):
    """:func:`weights_for_labels` for a rule name, jitted (one fused program per shape and rule)."""
    mu = None
    if rule == "iv":
        use = usable_annotators(gap) if usable is None else jnp.asarray(usable)
        eq = item_corrected_label(labels, fpr, gap, use.astype(jnp.result_type(gap)), use)
        # Items labelled only by unusable annotators have no corrected label (NaN): left out of mu.
        ok = jnp.isfinite(eq)
        c = jnp.ones_like(eq) if counts is None else counts
        mu = jnp.sum(jnp.where(ok, c * eq, 0.0)) / jnp.sum(jnp.where(ok, c, 0.0))
    return rule_weights(rule, fpr, gap, mu, usable)
