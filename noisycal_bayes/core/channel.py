"""Channel algebra: corrected labels ``(A_ij - a_j) / delta_j`` (paper §3), corrected vectors ``C_j^{-T} e_a`` for K
classes, and their per-item combination.

Missing responses are ``-1`` and drop out of every sum; convex weights are renormalised per item. An annotator whose gap
interval contains 0 (K classes: a near-singular ``C_j``) gets weight 0 (:func:`usable_annotators`,
:func:`usable_confusions`). Details: docs/foundations.md, *noisycal_bayes.core.channel*.
"""
import jax.numpy as jnp
import numpy as np

from .likelihood import _eager_jit  # one fused program per shape on concrete inputs; traced as before otherwise
from .likelihood import _segment_sum, _xp

#: Default largest condition number of a usable confusion matrix (:func:`usable_confusions`).
MAX_CONDITION = 100.0


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


def corrected_vectors(confusion):
    """Corrected clean-label vectors ``T[j, a, :] = C_j^{-T} e_a`` (row ``a`` of ``inv(C_j)``).

    Parameters
    ----------
    confusion : array of shape (n_annotators, K, K)
        Row-stochastic, ``C[j, y, a] = P(A_j = a | Y = y)``.

    Returns
    -------
    array of shape (n_annotators, K, K)
        ``E[T[j, A_j, :] | Y] = e_Y`` (docs/foundations.md). Non-finite rows for a singular ``C_j``: check
        :func:`usable_confusions` first.

    Examples
    --------
    >>> fpr, tpr = 0.1, 0.8
    >>> T = np.asarray(corrected_vectors(np.array([[[1 - fpr, fpr], [1 - tpr, tpr]]])))
    >>> np.allclose(T[0, :, 1], [(0 - fpr) / (tpr - fpr), (1 - fpr) / (tpr - fpr)])
    True
    """
    # E[T[A] | Y = y] = sum_a C[y, a] T[a] = (C T)[y] = e_y needs T = inv(C).
    xp = _xp(confusion)
    return xp.linalg.inv(xp.asarray(confusion))


def confusion_condition(confusion):
    """2-norm condition number of each ``C_j``, shape (n_annotators,) (``inf`` for a singular matrix).

    The corrected vectors :func:`corrected_vectors` scale noise by up to ``||C_j^{-1}||``; the condition number is
    the K-class analogue of ``1 / gap`` (for K = 2 it grows like ``1 / |tpr - fpr|``).
    """
    xp = _xp(confusion)
    s = xp.linalg.svd(xp.asarray(confusion), compute_uv=False)
    smin = s[..., -1]
    return xp.where(smin > 0, s[..., 0] / xp.where(smin > 0, smin, 1.0), xp.inf)


def usable_confusions(confusion, *, max_condition: float = MAX_CONDITION):
    """Annotators whose confusion matrix is invertible enough to correct with, shape (n_annotators,) bool.

    ``True`` where the condition number (:func:`confusion_condition`) is finite and at most ``max_condition``:
    the K-class version of the binary "gap near zero" rule. A spammer (identical rows, labels independent of
    ``Y``) has a singular ``C_j`` and is flagged.

    Examples
    --------
    >>> good = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> spam = np.array([[0.5, 0.5], [0.5, 0.5]])
    >>> np.asarray(usable_confusions(np.stack([good, spam]))).tolist()
    [True, False]
    """
    if not float(max_condition) >= 1.0:
        raise ValueError(f"`max_condition` must be >= 1 (a condition number); got {max_condition!r}.")
    cond = confusion_condition(confusion)
    xp = _xp(cond)
    return xp.isfinite(cond) & (cond <= max_condition)


def corrected_targets(responses, n_items: int, confusion, *, weights):
    """Combined corrected clean-label vector per item, shape (n_items, K).

    Parameters
    ----------
    responses : (item, annotator, label) triple of int arrays of shape (n_responses,)
        Labels in ``0..K-1``; repeated (item, annotator) pairs count as separate responses.
    n_items : int
    confusion : array of shape (n_annotators, K, K)
    weights : array of shape (n_annotators, K)
        :func:`annotator_weights` (0 for unusable annotators).

    Returns
    -------
    array of shape (n_items, K)
        ``t[i, k] = sum_r w[j_r, k] T[j_r, a_r, k] / sum_r w[j_r, k]`` over the item's responses; a NaN row for an
        item without a response of positive weight. Each coordinate is unbiased for ``1[Y_i = k]``.

    Examples
    --------
    >>> C = np.array([[[0.9, 0.1], [0.2, 0.8]]] * 2)
    >>> t = np.asarray(corrected_targets((np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1, 1, 0])), 3, C,
    ...                                   weights=np.full((2, 2), 0.5)))
    >>> [round(float(v), 4) for v in t[0]], bool(np.isnan(t[2]).all())  # (A - fpr) / gap = (1 - 0.1) / 0.7
    ([-0.2857, 1.2857], True)
    """
    xp = _xp(confusion, weights, *responses)
    item, ann, lab = (xp.asarray(x) for x in responses)
    c = xp.asarray(confusion)
    w = xp.asarray(weights, dtype=c.dtype)
    if w.shape != c.shape[:2]:
        raise ValueError(f"`weights` must have shape {tuple(c.shape[:2])} (n_annotators, K); got {w.shape}.")
    K = c.shape[1]
    # Zero-weight (unusable) annotators: replace C by I so that no NaN from a singular inverse enters the sums.
    safe = xp.where(xp.any(w > 0, axis=1)[:, None, None], c, xp.eye(K, dtype=c.dtype))
    T = xp.linalg.inv(safe)
    wr = w[ann]                                           # (n_responses, K)
    num = _segment_sum(xp, xp.where(wr > 0, wr * T[ann, lab], 0.0), item, n_items)
    den = _segment_sum(xp, wr, item, n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.where(den > 0, num / xp.where(den > 0, den, 1.0), xp.nan)
