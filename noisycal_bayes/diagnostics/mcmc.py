"""MCMC health: R-hat, bulk and tail ESS, divergences, turned into warnings that say what to do.

Only ArviZ calls that behave the same in ArviZ 0.23 (``InferenceData``) and 1.x (``DataTree``) are used
(ENVIRONMENT.md): ``az.ess(dataset, method=...)`` and ``az.rhat(dataset)`` on an ``xarray.Dataset`` with
``chain`` and ``draw`` dimensions. The table is built here with pandas, not with ``az.summary`` (whose
columns differ between the two lines).

Thresholds (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-normalization, folding, and
localization: an improved R-hat"): rank-normalised split R-hat below 1.01, and bulk and tail ESS of at
least 100 per chain.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..warnings import ConvergenceWarning

RHAT_MAX = 1.01
MIN_ESS_PER_CHAIN = 100


def _dataset(draws: dict, dims: dict):
    import xarray as xr

    data_vars = {}
    for name, arr in draws.items():
        arr = np.asarray(arr)
        extra = tuple(dims.get(name, ()))
        if len(extra) != arr.ndim - 2:
            extra = tuple(f"{name}_dim_{k}" for k in range(arr.ndim - 2))
        data_vars[name] = (("chain", "draw") + extra, arr)
    return xr.Dataset(data_vars)


def mcmc_diagnostics(draws: dict, dims: dict | None = None, coords: dict | None = None) -> pd.DataFrame:
    """R-hat and bulk/tail ESS of every scalar in ``draws``.

    Parameters
    ----------
    draws : dict of name -> array of shape (n_chains, n_draws, ...)
    dims : dict of name -> tuple of dimension names for the trailing axes, optional
    coords : dict of dimension name -> labels, optional (used to label the rows)

    Returns
    -------
    DataFrame
        One row per scalar, indexed by ``"name[label]"``, with columns ``name``, ``index`` (position
        within the variable), ``r_hat``, ``ess_bulk``, ``ess_tail``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> table = mcmc_diagnostics({"x": rng.normal(size=(4, 500))})
    >>> bool(table.loc["x", "r_hat"] < 1.01)
    True
    """
    import arviz as az

    dims = dims or {}
    coords = coords or {}
    ds = _dataset(draws, dims)
    bulk = az.ess(ds, method="bulk")
    tail = az.ess(ds, method="tail")
    rhat = az.rhat(ds)
    rows = []
    for name in draws:
        rb, rt, rr = (np.atleast_1d(np.asarray(x[name].values, dtype=np.float64)) for x in (bulk, tail, rhat))
        shape = np.asarray(draws[name]).shape[2:]
        for flat, idx in enumerate(np.ndindex(*shape) if shape else [()]):
            labels = []
            for axis, k in enumerate(idx):
                dim = tuple(dims.get(name, ()))[axis] if axis < len(dims.get(name, ())) else None
                lab = coords.get(dim)
                labels.append(str(lab[k]) if lab is not None and k < len(lab) else str(k))
            label = name if not idx else f"{name}[{', '.join(labels)}]"
            rows.append({"parameter": label, "name": name, "index": idx, "r_hat": rr.ravel()[flat],
                         "ess_bulk": rb.ravel()[flat], "ess_tail": rt.ravel()[flat]})
    return pd.DataFrame(rows).set_index("parameter")


def check_mcmc(table: pd.DataFrame, *, n_chains: int, n_divergent: int, n_draws: int, n_max_depth: int = 0,
               max_tree_depth: int = 10, func: str = "fit_nuts", stacklevel: int = 3) -> list:
    """Emit a :class:`ConvergenceWarning` for each problem, saying what to do. Returns the messages.

    Parameters
    ----------
    table : DataFrame from :func:`mcmc_diagnostics`
    n_chains, n_draws : int
        Chains and post-warm-up draws per chain.
    n_divergent : int
        Divergent transitions after warm-up (all chains).
    n_max_depth : int
        Transitions that hit the maximum tree depth.
    """
    notes = []
    min_ess = MIN_ESS_PER_CHAIN * n_chains
    if n_divergent > 0:
        notes.append(
            f"{func}: {n_divergent} divergent transitions after warm-up: the sampler could not follow the posterior "
            "everywhere, so the draws may be biased. Raise `target_accept` (e.g. 0.95) and look at where the divergent "
            "draws are (to_arviz().sample_stats.diverging); if they persist, the model or the groups are probably "
            "weakly identified.")
    if n_chains > 1:
        bad = table.index[~(table["r_hat"] <= RHAT_MAX)]
        if len(bad):
            worst = float(np.nanmax(table["r_hat"].to_numpy())) if np.isfinite(table["r_hat"]).any() else float("nan")
            notes.append(
                f"{func}: R-hat above {RHAT_MAX} for {list(bad[:6])}{' ...' if len(bad) > 6 else ''} (max {worst:.3f}): "
                "the chains disagree. Run longer (`n_warmup`, `n_draws`), and if they still disagree the posterior has "
                "several modes: check identifiability (more annotators, better-separated groups).")
    low = table.index[~((table["ess_bulk"] >= min_ess) & (table["ess_tail"] >= min_ess))]
    if len(low):
        worst = float(np.nanmin(np.minimum(table["ess_bulk"], table["ess_tail"])))
        notes.append(
            f"{func}: effective sample size below {min_ess} ({MIN_ESS_PER_CHAIN} per chain) for {list(low[:6])}"
            f"{' ...' if len(low) > 6 else ''} (min {worst:.0f} of {n_chains * n_draws} draws): intervals and tail "
            "quantiles are unreliable. Increase `n_draws` (and `n_warmup`).")
    if n_max_depth > 0:
        notes.append(
            f"{func}: {n_max_depth} transitions hit the maximum tree depth ({max_tree_depth}): sampling is inefficient "
            "(not biased). Raise `max_tree_depth` or check for a badly scaled posterior.")
    for msg in notes:
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)
    return notes
