"""Real label noise: CIFAR-10N vehicle vs. animal (paper §6.3, Table 3; Appendix G.4).

Labels: CIFAR-10N, Wei et al., ICLR 2022 (CC BY-NC 4.0); scores: cgnorthcutt/confidentlearning-reproduce (MIT). Channels
by the marginal EM on a fitting half; maps and ECEs on the evaluation half. The protocol: docs/foundations.md,
*noisycal_bayes.experiments.cifar10n*.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import AnnotationSet
from ..reference import ece, fit_em, fit_platt, fit_projected_histogram, fit_temperature, nc_ece, smece
from ..reference.recalibration import (corrected_item_labels, predict_histogram, predict_platt,
                                       predict_temperature)
from ._common import N_BINS

#: Environment variable read for the location of ``cifar10n_vehicle.csv`` when no ``path`` is passed.
ENV_VAR = "NOISYCAL_CIFAR10N"
MAPS = ("temperature", "platt", "histogram")


def cifar10n_path(path=None) -> Path:
    """Location of ``cifar10n_vehicle.csv``: ``path``, else ``$NOISYCAL_CIFAR10N``, else the shared data folder's copy.

    The data set is not bundled with the package (50,000 rows; labels under CC BY-NC 4.0). Without ``path`` and
    the environment variable, the shared data folder of a development checkout is tried
    (:func:`noisycal_bayes.experiments.real_data.shared_data_dir`).

    Parameters
    ----------
    path : str or path-like, optional

    Returns
    -------
    pathlib.Path
        An existing file.

    Raises
    ------
    FileNotFoundError
        No ``path``, no ``NOISYCAL_CIFAR10N`` and no shared data folder holding the file, or the file named does
        not exist.

    Examples
    --------
    >>> cifar10n_path("no/such/file.csv")
    Traceback (most recent call last):
    ...
    FileNotFoundError: cifar10n_vehicle.csv not found at 'no/such/file.csv' (from the `path` argument). Pass `path=` or set the environment variable NOISYCAL_CIFAR10N to the file's location.
    """
    source = "the `path` argument"
    if path is None:
        path, source = os.environ.get(ENV_VAR), f"the environment variable {ENV_VAR}"
        if not path:
            from .real_data import shared_data_path

            path, source = shared_data_path("cifar10n_vehicle.csv"), "the shared data folder"
        if not path:
            raise FileNotFoundError(f"no location for cifar10n_vehicle.csv: pass `path=` or set the environment "
                                    f"variable {ENV_VAR} to the file's location.")
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise FileNotFoundError(f"cifar10n_vehicle.csv not found at {str(path)!r} (from {source}). Pass `path=` or "
                                f"set the environment variable {ENV_VAR} to the file's location.")
    return resolved


def load_cifar10n(path=None):
    """``(AnnotationSet, y_ref)`` from ``cifar10n_vehicle.csv`` (annotators ``ann1..ann3``).

    ``path`` defaults to the environment variable ``NOISYCAL_CIFAR10N`` (see :func:`cifar10n_path`).
    """
    frame = pd.read_csv(cifar10n_path(path), usecols=["item", "y_ref", "score", "ann1", "ann2", "ann3"])
    labels = frame[["ann1", "ann2", "ann3"]].to_numpy(dtype=np.int8)
    data = AnnotationSet(labels, frame["score"].to_numpy(dtype=np.float64), frame["item"].to_numpy().astype(object),
                         np.array(["ann1", "ann2", "ann3"], dtype=object))
    return data, frame["y_ref"].to_numpy(dtype=np.int8)


def _fit_map(kind, z, targets):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "temperature":
            t = fit_temperature(z, targets).temperature
            return lambda s: predict_temperature(s, t), f"T={t:.3f}"
        if kind == "platt":
            f = fit_platt(z, targets)
            return lambda s: predict_platt(s, f.alpha, f.beta), f"alpha={f.alpha:.3f}, beta={f.beta:.3f}"
        if kind == "histogram":
            f = fit_projected_histogram(z, targets, bins=N_BINS)
            return lambda s: predict_histogram(s, f.edges, f.bin_values), f"{len(f.clipped_bins)} bins clipped"
    raise ValueError(f"unknown map {kind!r}; expected one of {MAPS}.")


def _bb_binned(z, target, weights, n_bins=N_BINS):
    """Bayesian-bootstrap draws of ``sum_k |sum_{i in B_k} g_i (t_i - z_i)| / sum_i g_i``; weights (S, n)."""
    idx = np.minimum((z * n_bins).astype(int), n_bins - 1)
    onehot = np.zeros((z.size, n_bins))
    onehot[np.arange(z.size), idx] = 1.0
    resid = onehot * (target - z)[:, None]  # (n, K)
    return np.abs(weights @ resid).sum(axis=1) / weights.sum(axis=1)


def cifar10n_table(*, path=None, maps=MAPS, fit_fraction: float = 0.5, n_items: int | None = None,
                   bayes: bool = True, n_warmup: int = 500, n_draws: int = 500, n_boot: int = 1000,
                   level: float = 0.9, seed: int = 0) -> pd.DataFrame:
    """Table 3: ECE of the base and recalibrated scores on the evaluation half, three ways, with intervals.

    Parameters
    ----------
    path : path of ``cifar10n_vehicle.csv``; default the environment variable ``NOISYCAL_CIFAR10N``
    maps : subset of ``("temperature", "platt", "histogram")``
    fit_fraction : share of items for channel and recalibration fitting
    n_items : int, optional
        Use a random subset of this many items (tests); default all 50,000.
    bayes : fit the marginal Dawid-Skene posterior by NUTS (2 chains) and report plug-in intervals
    n_warmup, n_draws : NUTS settings per chain
    n_boot : Bayesian-bootstrap draws for the oracle and soft-vote intervals
    level : interval level
    seed : int (split, subset, bootstrap and NUTS)

    Returns
    -------
    DataFrame, one row per score vector (``method`` = base or ``<map>``, ``fit`` = none / naive /
    corrected), columns ``oracle_ece, oracle_lower, oracle_upper, softvote_ece, softvote_lower,
    softvote_upper, nc_ece`` and with ``bayes`` ``bayes_estimate, bayes_mean, bayes_lower, bayes_upper,
    bayes_interval``; ``params`` describes the fitted map. ``attrs`` holds the channel fits and sizes.
    Raises
    ------
    FileNotFoundError
        No data file (see :func:`cifar10n_path`).
    """
    data, y_ref = load_cifar10n(path)
    rng = np.random.default_rng(seed)
    fit_data, eval_data, y_eval = _split(data, y_ref, rng, fit_fraction, n_items)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        em = fit_em(fit_data, model="dawid_skene")  # the paper's marginal Dawid-Skene EM, three annotators
    channel = em.require()
    z_fit, z_eval = fit_data.scores, eval_data.scores
    targets = {"naive": fit_data.vote_fraction(), "corrected": corrected_item_labels(fit_data, channel).values}
    vectors = [("base", "none", z_eval, "")]
    for kind in maps:
        for fit_kind in ("naive", "corrected"):
            f, desc = _fit_map(kind, z_fit, targets[fit_kind])
            vectors.append((kind, fit_kind, np.clip(f(z_eval), 0.0, 1.0), desc))

    post_fit = None
    if bayes:
        from ..inference import fit_nuts
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post_fit = fit_nuts(fit_data, model="dawid_skene", n_chains=2, n_warmup=n_warmup, n_draws=n_draws,
                                seed=seed, progress_bar=False)
    g = rng.dirichlet(np.ones(eval_data.n_items), size=n_boot) * eval_data.n_items
    rows = [_score_row(eval_data, y_eval, z, channel, post_fit, g, level=level, seed=seed,
                       method=method, fit=fit_kind, params=desc)
            for method, fit_kind, z, desc in vectors]
    out = pd.DataFrame(rows)
    out.attrs.update(n_fit=int(fit_data.n_items), n_eval=int(eval_data.n_items), em_fpr=channel.fpr.tolist(),
                     em_tpr=channel.tpr.tolist(), level=level,
                     nuts_fpr=None if post_fit is None else np.asarray(post_fit.channel.fpr).tolist(),
                     nuts_tpr=None if post_fit is None else np.asarray(post_fit.channel.tpr).tolist(),
                     nuts_divergent=None if post_fit is None else int(getattr(post_fit, "n_divergent", 0) or 0))
    return out


def _split(data, y_ref, rng, fit_fraction, n_items):
    """Optional random subset of ``n_items``, then a random fitting / evaluation split (rows kept in order)."""
    if n_items is not None and n_items < data.n_items:
        keep = np.sort(rng.choice(data.n_items, size=n_items, replace=False))
        data, y_ref = data.subset(keep), y_ref[keep]
    perm = rng.permutation(data.n_items)
    n_fit = int(round(fit_fraction * data.n_items))
    fit_rows, eval_rows = np.sort(perm[:n_fit]), np.sort(perm[n_fit:])
    return data.subset(fit_rows), data.subset(eval_rows), y_ref[eval_rows]


def _score_row(eval_data, y_eval, z, channel, post_fit, g, *, level, seed, **row):
    """One row of Table 3: oracle, soft-vote and noise-corrected ECE of the scores ``z``, shape (n_eval,).

    ``g`` holds the Bayesian-bootstrap weights, shape (n_boot, n_eval); ``post_fit`` is the NUTS fit or None;
    ``row`` (method, fit, params) is copied into the result.
    """
    ev = eval_data.with_scores(z)
    soft = eval_data.vote_fraction()
    q = [(1 - level) / 2, (1 + level) / 2]
    o_lo, o_hi = np.quantile(_bb_binned(z, y_eval.astype(float), g), q)
    s_lo, s_hi = np.quantile(_bb_binned(z, soft, g), q)
    row.update(oracle_ece=ece(z, y_eval, bins=N_BINS), oracle_lower=o_lo, oracle_upper=o_hi,
               softvote_ece=smece(z, soft, bins=N_BINS), softvote_lower=s_lo, softvote_upper=s_hi,
               nc_ece=nc_ece(ev, channel, bins=N_BINS).value)
    if post_fit is not None:
        from ..propagate import posterior_nc_ece
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = posterior_nc_ece(ev, post_fit, bins=N_BINS, method="plugin", level=level, seed=seed)
        one_sided = post.interval_to_read == "upper_one_sided"
        row.update(bayes_estimate=post.debiased, bayes_mean=post.mean,
                   bayes_lower=0.0 if one_sided else post.lower,
                   bayes_upper=post.upper_one_sided if one_sided else post.upper,
                   bayes_interval=post.interval_to_read)
    return row
