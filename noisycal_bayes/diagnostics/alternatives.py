"""Sensitivity of NC-ECE to the channel model: shared channels against score-dependent and correlated noise.

Three NumPyro models on the same compressed ``(score group, response pattern)`` counts:

* ``"shared"``: the paper's model (:func:`noisycal_bayes.models.grouped_dawid_skene`);
* ``"score_dependent"``: channels per score group, partially pooled toward a shared channel
  (:mod:`noisycal_bayes.models.score_noise`);
* ``"correlated"``: a latent item effect shared by the annotators (Qu, Tan and Kutner 1996;
  :mod:`noisycal_bayes.models.correlated`).

Each is fitted by NUTS (the package's compiled NUTS program, reused for every data set of the same design)
or MAP (L-BFGS on NumPyro's potential in unconstrained space), compared by PSIS-LOO (Vehtari, Gelman and
Gabry, *Statistics and Computing* 27, 2017; ArviZ ``az.loo``) on the compressed rows, and propagated into NC-ECE
with one function for all three (:func:`nc_ece_group_channels`; the corrected label of an item in group ``g`` is
``(A_ij - fpr_gj) / gap_gj``). How far NC-ECE moves between the models is the sensitivity result: a model the data
prefer (higher ``elpd_loo``) whose NC-ECE differs says the shared-channel number rests on an assumption the data
question. LOO on compressed rows and the NC-ECE with channels per group: docs/methods.md.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._validation import check_level
from ..data import AnnotationSet, Binning, as_binning, bin_index
# The fitting half lives in the inference layer (fit_map / fit_nuts register the richer models through it); its names
# are re-exported here, where the comparison uses them.
from ..inference.alternatives import (ALTERNATIVE_MODELS, GROUP_CHANNEL_MODELS, AlternativeFit,  # noqa: F401
                                      _channels, _inputs, _model_fn, _table, fit_alternative, registered_fit)


def shared_fit_from_draws(data: AnnotationSet, draws: dict, *, groups=Binning.equal_mass(5),
                          method: str = "nuts") -> AlternativeFit:
    """The shared-channel model as an :class:`AlternativeFit` from existing draws (no new fit).

    ``draws`` holds ``fpr``, ``tpr`` (n_chains, n_draws, J) and ``prevalence`` (n_chains, n_draws, G): the draws of
    ``fit_nuts(model="grouped", groups=groups)`` or the replicates of ``bootstrap_em`` (one chain). Each row's
    log-likelihood is :func:`~noisycal_bayes.models.score_noise.grouped_rows_loglik` with the same channel in
    every group (the likelihood of the grouped model), so :func:`row_loo` compares it with the other models on the
    same rows.

    Examples
    --------
    >>> import numpy as np
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.85], seed=0)
    >>> d = {"fpr": np.tile(sim.channel.fpr, (1, 4, 1)), "tpr": np.tile(sim.channel.tpr, (1, 4, 1)),
    ...      "prevalence": np.full((1, 4, 5), 0.4)}
    >>> shared_fit_from_draws(sim.data, d).loglik_rows.shape[:2]
    (1, 4)
    """
    from ..core import x64
    from ..models.score_noise import grouped_rows_loglik

    patterns, group, counts, keep, n_groups, index = _inputs(data, groups, "shared_fit_from_draws")
    f, t, prev = (np.asarray(draws[k], np.float64) for k in ("fpr", "tpr", "prevalence"))
    shape = f.shape[:2]
    prev = prev.reshape(shape + (-1,))
    if prev.shape[-1] != n_groups:
        raise ValueError(f"shared_fit_from_draws: the draws have {prev.shape[-1]} prevalences but `groups` makes "
                         f"{n_groups} score groups.")
    flat = {"fpr": f.reshape((-1,) + f.shape[2:]), "tpr": t.reshape((-1,) + t.shape[2:]),
            "prevalence": prev.reshape(-1, n_groups)}
    fpr_g, tpr_g = _channels("shared", flat, n_groups)
    import jax

    with x64():
        rows = jax.vmap(lambda a, b, c: grouped_rows_loglik(patterns[keep], group[keep], a, b, c))(
            jax.numpy.asarray(fpr_g), jax.numpy.asarray(tpr_g), jax.numpy.asarray(flat["prevalence"]))
        ll = np.asarray(rows, np.float64).reshape(shape + (-1,))
    return AlternativeFit("shared", method, {k: v.reshape(shape + v.shape[1:]) for k, v in flat.items()}, fpr_g,
                          tpr_g, ll, counts[keep], index, {})


# ------------------------------------------------------------------ NC-ECE with channels per group
def nc_ece_group_channels(data: AnnotationSet, group_index, fpr_group, tpr_group, *, bins=10,
                          weights="iv") -> np.ndarray:
    """NC-ECE with channels that differ across score groups (docs/methods.md), one value per channel draw.

    Parameters
    ----------
    data : AnnotationSet with scores
    group_index : int array of shape (n_items,)
        Score group of each item.
    fpr_group, tpr_group : arrays of shape (S, n_groups, n_annotators) or (n_groups, n_annotators)
    bins : int or Binning, default 10
        Evaluation bins (an int means equal width).
    weights : {"iv", "equal", "gap", "squared_gap"} or array of shape (n_annotators,)

    Returns
    -------
    ndarray of shape (S,) (a 0-d array for one channel)

    Examples
    --------
    With one channel in every group and equal weights this is :func:`noisycal_bayes.nc_ece`:

    >>> import numpy as np
    >>> from noisycal_bayes import nc_ece
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> f, t = np.tile(sim.channel.fpr, (2, 1)), np.tile(sim.channel.tpr, (2, 1))
    >>> v = nc_ece_group_channels(sim.data, (sim.data.scores > 0.5).astype(int), f, t, weights="equal")
    >>> bool(np.isclose(v, nc_ece(sim.data, sim.channel, weights="equal").value))
    True
    """
    from ..reference.recalibration import group_corrected_labels

    f = np.asarray(fpr_group, np.float64)
    t = np.asarray(tpr_group, np.float64)
    single = f.ndim == 2
    f, t = np.atleast_3d(f[None] if single else f), np.atleast_3d(t[None] if single else t)
    z = data.require_scores()
    labels = data.labels
    idx = np.asarray(group_index)
    edges = as_binning(bins).edges_for(z)
    k = bin_index(z, edges)
    n_bins = edges.size - 1
    out = np.empty(f.shape[0])
    for s in range(f.shape[0]):
        ytil, _ = group_corrected_labels(labels, idx, f[s], t[s], weights)
        resid = np.bincount(k, weights=ytil - z, minlength=n_bins)
        out[s] = np.abs(resid).sum() / z.size
    return out[0] if single else out


# ------------------------------------------------------------------ LOO
def row_loo(ll_rows):
    """PSIS-LOO per compressed row with ArviZ (docs/methods.md): ``(elpd per row (R,), pareto k per row (R,))``.

    ``ll_rows`` (n_chains, n_draws, n_rows): each row's per-item log-likelihood at every draw. Works with ArviZ
    0.x and 1.x.
    """
    import arviz as az
    import xarray as xr

    c, d, r = ll_rows.shape
    ll = xr.Dataset({"labels": (("chain", "draw", "row"), ll_rows)},
                    coords={"chain": np.arange(c), "draw": np.arange(d), "row": np.arange(r)})
    post = xr.Dataset({"dummy": (("chain", "draw"), np.zeros((c, d)))},
                      coords={"chain": np.arange(c), "draw": np.arange(d)})
    major = int(str(az.__version__).split(".")[0])
    obj = xr.DataTree.from_dict({"posterior": post, "log_likelihood": ll}) if major >= 1 else \
        az.InferenceData(posterior=post, log_likelihood=ll)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Pareto-k warnings: the k values are reported instead
        res = az.loo(obj, pointwise=True)
    # ArviZ 0.23 names the pointwise values `loo_i`, ArviZ 1.x (arviz-stats) `elpd_i`.
    elpd_i = res.loo_i if hasattr(res, "loo_i") else res.elpd_i
    return np.asarray(elpd_i).reshape(-1), np.asarray(res.pareto_k).reshape(-1)


def stacking_weights(lpd, counts=None, *, tol: float = 1e-10, max_iter: int = 100_000) -> np.ndarray:
    """Stacking weights of predictive distributions (Yao, Vehtari, Simpson and Gelman, *Bayesian Analysis* 13,
    2018, eq. 4): ``w = argmax_{w in simplex} sum_i c_i log sum_k w_k exp(lpd_ik)``.

    Parameters
    ----------
    lpd : array of shape (n_rows, n_models)
        Each row's leave-one-out log predictive density under each model (``elpd_i`` of :func:`row_loo`).
    counts : array of shape (n_rows,), optional
        Items per row (compressed rows: a row stands for ``c_r`` items with the same ``lpd``); default 1 each.
    tol, max_iter : convergence of the iteration.

    Returns
    -------
    ndarray of shape (n_models,)
        Non-negative, summing to 1.

    Notes
    -----
    The objective is the log-likelihood of mixture proportions with known component densities
    ``exp(lpd_ik)``, concave in ``w``; it is maximised by the EM fixed point ``w_k <- sum_i c_i r_ik / sum_i
    c_i`` with responsibilities ``r_ik = w_k p_ik / sum_l w_l p_il`` (Dempster, Laird and Rubin 1977), which
    increases the objective at every step and stays on the simplex. ArviZ's ``compare(method="stacking")``
    maximises the same objective by a constrained optimiser; the tests compare the two.

    Examples
    --------
    >>> import numpy as np
    >>> lpd = np.log([[0.5, 0.1], [0.2, 0.4], [0.3, 0.3]])
    >>> stacking_weights(lpd).round(3).tolist()
    [0.875, 0.125]
    """
    lpd = np.asarray(lpd, np.float64)
    if lpd.ndim != 2 or not np.all(np.isfinite(lpd)):
        raise ValueError(f"stacking_weights: `lpd` must be a finite (n_rows, n_models) array; got shape {lpd.shape}.")
    c = np.ones(lpd.shape[0]) if counts is None else np.asarray(counts, np.float64)
    p = np.exp(lpd - lpd.max(axis=1, keepdims=True))
    keep = c > 0
    p, c = p[keep], c[keep] / c[keep].sum()
    w = np.full(lpd.shape[1], 1.0 / lpd.shape[1])
    for _ in range(int(max_iter)):
        mix = p @ w
        new = w * ((c / mix) @ p)
        new /= new.sum()
        if np.max(np.abs(new - w)) < tol:
            w = new
            break
        w = new
    return w


def _weighted_total(values, counts):
    """``(sum_r c_r v_r, sqrt(n Var_items))`` for per-row values repeated ``c_r`` times (n items)."""
    n = counts.sum()
    total = float(np.sum(counts * values))
    mean = total / n
    var = float(np.sum(counts * (values - mean) ** 2) / max(n - 1, 1))
    return total, float(np.sqrt(n * var))


@dataclass(frozen=True)
class NoiseModelComparison:
    """Channel models compared by PSIS-LOO and by the NC-ECE each implies (:func:`compare_noise_models`).

    Attributes
    ----------
    table : DataFrame, one row per model
        ``model``, ``method``, ``elpd_loo``, ``se``, ``elpd_diff`` (against ``"shared"``; > 0: the data
        prefer the model), ``se_diff``, ``pareto_k_max``, ``nc_ece`` (posterior mean over draws, or at the
        MAP), ``nc_ece_lower``, ``nc_ece_upper`` (equal-tailed ``level`` quantiles over the channel draws;
        NaN for MAP), ``nc_ece_shift`` (``nc_ece`` minus the shared model's), ``extra`` (the dependence
        parameter's posterior mean: ``tau_fpr``/``tau_u`` or ``dependence``), and the NUTS diagnostics
        ``rhat_max``, ``ess_min``, ``divergences``.
    fits : dict
        :class:`AlternativeFit` by model name.
    level : float
    settings : dict
    """

    table: pd.DataFrame = field(repr=False)
    fits: dict = field(repr=False)
    level: float
    settings: dict = field(default_factory=dict)


def compare_noise_models(data: AnnotationSet, *, models=ALTERNATIVE_MODELS, groups=Binning.equal_mass(5),
                         method: str = "nuts", bins=10, weights="iv", level: float = 0.9, n_chains: int = 2,
                         n_warmup: int = 500, n_draws: int = 500, max_nc_ece_draws: int = 200,
                         seed: int = 0) -> NoiseModelComparison:
    """Fit the shared, score-dependent and correlated channel models and compare them by PSIS-LOO and NC-ECE.

    Parameters
    ----------
    data : AnnotationSet with scores
    models : sequence of {"shared", "score_dependent", "correlated"}
        Must include ``"shared"`` (the reference of the differences).
    groups : Binning, default ``Binning.equal_mass(5)``
    method : {"nuts", "map"}, default "nuts"
        ``"map"`` gives NC-ECE at the mode only (no LOO: ``elpd_loo`` NaN).
    bins, weights : evaluation bins and annotator weights of NC-ECE.
    level : float, default 0.9
    n_chains, n_warmup, n_draws : NUTS settings.
    max_nc_ece_draws : int, default 200
        Draws (evenly thinned) used for the NC-ECE posterior.
    seed : int, default 0

    Returns
    -------
    NoiseModelComparison

    Raises
    ------
    ValueError
        ``models`` without ``"shared"`` or with an unknown name; see :func:`fit_alternative`.

    Examples
    --------
    >>> from noisycal_bayes import Binning
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(1500, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.8], seed=0)
    >>> cmp = compare_noise_models(sim.data, method="map", groups=Binning.equal_mass(3))  # doctest: +SKIP
    >>> cmp.table["model"].tolist()  # doctest: +SKIP
    ['shared', 'score_dependent', 'correlated']

    (Skipped in the doctest run: three model compilations take about a minute; the same call is tested in
    ``tests/diagnostics/test_alternatives.py``.)
    """
    func = "compare_noise_models"
    models = tuple(models)
    bad = [m for m in models if m not in ALTERNATIVE_MODELS]
    if bad or "shared" not in models:
        raise ValueError(f"{func}: `models` must include 'shared' and only names of {list(ALTERNATIVE_MODELS)}; "
                         f"got {list(models)}.")
    level = check_level(level)
    fits = {m: fit_alternative(data, m, groups=groups, method=method, n_chains=n_chains, n_warmup=n_warmup,
                               n_draws=n_draws, seed=seed) for m in models}
    q = [(1 - level) / 2, (1 + level) / 2]
    loo = {}
    if method == "nuts":
        loo = {m: row_loo(f.loglik_rows) for m, f in fits.items()}
    rows = []
    base_elpd = loo["shared"][0] if loo else None
    for m, f in fits.items():
        s_total = f.fpr_group.shape[0]
        use = np.unique(np.linspace(0, s_total - 1, min(max_nc_ece_draws, s_total)).round().astype(int))
        vals = np.atleast_1d(nc_ece_group_channels(data, f.group_index, f.fpr_group[use], f.tpr_group[use],
                                                   bins=bins, weights=weights))
        row = {"model": m, "method": method, "nc_ece": float(vals.mean()),
               "nc_ece_lower": float(np.quantile(vals, q[0])) if vals.size > 1 else np.nan,
               "nc_ece_upper": float(np.quantile(vals, q[1])) if vals.size > 1 else np.nan}
        if loo:
            elpd_i, k = loo[m]
            row["elpd_loo"], row["se"] = _weighted_total(elpd_i, f.counts)
            row["elpd_diff"], row["se_diff"] = _weighted_total(elpd_i - base_elpd, f.counts)
            row["pareto_k_max"] = float(np.max(k))
        else:
            row.update(elpd_loo=np.nan, se=np.nan, elpd_diff=np.nan, se_diff=np.nan, pareto_k_max=np.nan)
        extra = {"score_dependent": ("tau_fpr", "tau_u"), "correlated": ("dependence",)}.get(m, ())
        row["extra"] = ", ".join(f"{e} = {float(np.mean(f.draws[e])):.3f}" for e in extra)
        row.update({k2: f.diagnostics.get(k2, np.nan) for k2 in ("rhat_max", "ess_min", "divergences")})
        rows.append(row)
    table = pd.DataFrame(rows)
    table["nc_ece_shift"] = table["nc_ece"] - float(table.loc[table["model"] == "shared", "nc_ece"].iloc[0])
    cols = ["model", "method", "elpd_loo", "se", "elpd_diff", "se_diff", "pareto_k_max", "nc_ece", "nc_ece_lower",
            "nc_ece_upper", "nc_ece_shift", "extra", "rhat_max", "ess_min", "divergences"]
    return NoiseModelComparison(table[cols], fits, level,
                                dict(groups=groups, method=method, bins=bins, weights=weights, n_chains=n_chains,
                                     n_warmup=n_warmup, n_draws=n_draws, seed=seed))
