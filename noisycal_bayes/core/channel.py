"""Channel algebra: corrected labels ``(A_ij - a_j) / delta_j`` and their per-item combination.

Paper: Hanada & Futami, §3 (corrected labels and residuals). Missing responses are ``-1`` in
``labels`` and drop out of every sum; convex weights are renormalised per item over the annotators
who labelled it.
"""
import jax.numpy as jnp


def corrected_labels(labels, fpr, gap):
    """Corrected labels ``Ytilde_ij = (A_ij - fpr_j) / gap_j``; 0 where missing.

    Parameters
    ----------
    labels : array of shape (n_items, n_annotators), -1 = missing
    fpr, gap : arrays of shape (n_annotators,)

    Returns
    -------
    array of shape (n_items, n_annotators)
    """
    obs = labels >= 0
    return jnp.where(obs, (labels - fpr) / gap, 0.0)


def combine_item_weights(observed, weights):
    """Per-item weights ``w_j 1[j obs] / sum_k w_k 1[k obs]``, shape (n_items, n_annotators).

    ``observed`` is boolean (n_items, n_annotators); ``weights`` (n_annotators,) are convex.
    """
    w = jnp.where(observed, weights, 0.0)
    return w / jnp.sum(w, axis=-1, keepdims=True)


def item_corrected_label(labels, fpr, gap, weights):
    """Combined corrected label per item ``sum_j W_ij Ytilde_ij``, shape (n_items,)."""
    W = combine_item_weights(labels >= 0, weights)
    return jnp.sum(W * corrected_labels(labels, fpr, gap), axis=-1)


def mean_corrected_label(labels, fpr, gap):
    """The equally weighted mean corrected label (the IV rule's estimate of ``mu``), a scalar."""
    return jnp.mean(item_corrected_label(labels, fpr, gap, jnp.ones_like(fpr)))
