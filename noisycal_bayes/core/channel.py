"""Channel algebra: corrected labels ``(A_ij - a_j) / delta_j`` and their per-item combination.

Paper: Hanada & Futami, §3 (corrected labels and residuals). Missing responses are ``-1`` in
``labels`` and drop out of every sum; convex weights are renormalised per item over the annotators
who labelled it.

Small and negative gaps (crowds, issue 16). ``E[(A_j - a_j) / delta_j | Y] = Y`` holds for any
``delta_j != 0``: an adversarial annotator (``delta_j < 0``) is used with its sign. Near ``delta_j = 0`` the
correction's variance ``~ 1 / delta_j^2`` explodes, so the rule of :func:`usable_annotators` decides, once
for every consumer (corrected labels here, weights in :mod:`~noisycal_bayes.core.weights`), which
annotators are used at all: an annotator whose gap interval contains 0 gets weight 0, and its corrected
label is set to 0 instead of being divided by a gap near zero.
"""
import jax.numpy as jnp

from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise


@_eager_jit
def usable_annotators(gap, gap_lower=None, gap_upper=None):
    """Which annotators' labels may be corrected: the gap is known to be away from 0.

    Parameters
    ----------
    gap : array of shape (..., n_annotators)
    gap_lower, gap_upper : arrays of the same shape, optional
        An interval for each gap (e.g. ``FitResult.annotators``' ``gap_lower`` / ``gap_upper``).

    Returns
    -------
    bool array of shape (..., n_annotators)
        With an interval: ``gap_lower > 0`` or ``gap_upper < 0`` (the interval excludes 0; an adversarial
        annotator is usable). Without: ``gap != 0``.

    Examples
    --------
    >>> usable_annotators(jnp.array([0.6, 0.01, -0.4]), jnp.array([0.5, -0.1, -0.5]),
    ...                   jnp.array([0.7, 0.12, -0.3])).tolist()
    [True, False, True]
    """
    gap = jnp.asarray(gap)
    if gap_lower is None and gap_upper is None:
        return gap != 0
    if gap_lower is None or gap_upper is None:
        raise ValueError("`gap_lower` and `gap_upper` must be given together.")
    return (jnp.asarray(gap_lower) > 0) | (jnp.asarray(gap_upper) < 0)


@_eager_jit
def inverse_gap(gap, usable=None):
    """``1 / gap_j`` where the annotator is usable, else 0 (never a division by a gap near zero)."""
    usable = usable_annotators(gap) if usable is None else jnp.asarray(usable)
    # Divide by 1 where unusable: the unused branch of jnp.where must stay finite under autodiff.
    return jnp.where(usable, 1.0 / jnp.where(usable, gap, 1.0), 0.0)


@_eager_jit
def corrected_labels(labels, fpr, gap, usable=None):
    """Corrected labels ``Ytilde_ij = (A_ij - fpr_j) / gap_j``; 0 where missing or the annotator is unusable.

    Parameters
    ----------
    labels : array of shape (n_items, n_annotators), -1 = missing
    fpr, gap : arrays of shape (n_annotators,)
    usable : bool array of shape (n_annotators,), optional
        :func:`usable_annotators` (default: ``gap != 0``). Negative gaps are used with their sign.

    Returns
    -------
    array of shape (n_items, n_annotators)
    """
    obs = labels >= 0
    return jnp.where(obs, (labels - fpr) * inverse_gap(gap, usable), 0.0)


@_eager_jit
def combine_item_weights(observed, weights):
    """Per-item weights ``w_j 1[j obs] / sum_k w_k 1[k obs]``, shape (n_items, n_annotators).

    ``observed`` is boolean (n_items, n_annotators); ``weights`` (n_annotators,) are convex. An item whose
    observed annotators all have weight 0 (e.g. only unusable ones) gets NaN weights: it carries no
    corrected information, and a silent 0 would bias the item's bin toward 0.
    """
    w = jnp.where(observed, weights, 0.0)
    return w / jnp.sum(w, axis=-1, keepdims=True)


@_eager_jit
def item_corrected_label(labels, fpr, gap, weights, usable=None):
    """Combined corrected label per item ``sum_j W_ij Ytilde_ij``, shape (n_items,)."""
    W = combine_item_weights(labels >= 0, weights)
    return jnp.sum(W * corrected_labels(labels, fpr, gap, usable), axis=-1)


@_eager_jit
def mean_corrected_label(labels, fpr, gap, usable=None):
    """The equally weighted mean corrected label over usable annotators (the IV rule's estimate of ``mu``)."""
    usable = usable_annotators(gap) if usable is None else jnp.asarray(usable)
    return jnp.nanmean(item_corrected_label(labels, fpr, gap, usable.astype(jnp.result_type(float)), usable))
