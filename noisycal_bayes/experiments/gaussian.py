"""Gaussian recalibration (paper Appendix G.2, Table 5).

``Y ~ Bernoulli(1/2)``, ``X | Y ~ N(2Y - 1, 1)``, predictor ``Z = sigmoid(3x + 0.5)``, two annotators; temperature,
Platt and histogram maps fitted corrected, naive and oracle, scored by ``L1(m)``, log loss and Brier score. The model
and protocol: docs/foundations.md, *noisycal_bayes.experiments.gaussian*.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._progress import progress
from ..data import AnnotationSet, Binning, Channel
from ..reference import fit_em
from ..reference.recalibration import corrected_item_labels
from ._common import N_BINS, N_GROUPS, fit_point_map, mc_summary

SIZES = (1500, 3000, 6000, 12000)
FPR = (0.10, 0.25)
TPR = (0.85, 0.75)
MAPS = ("temperature", "platt", "histogram")
FITS = ("corrected", "naive", "oracle")


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def simulate_gaussian(n_items: int, *, fpr=FPR, tpr=TPR, seed=0):
    """``(AnnotationSet, clean_labels, m(Z))`` from the Gaussian model of this module."""
    rng = np.random.default_rng(seed)
    channel = Channel(fpr, tpr)
    y = (rng.random(n_items) < 0.5).astype(np.int8)
    x = rng.normal(2.0 * y - 1.0, 1.0)
    z = _sigmoid(3.0 * x + 0.5)
    m = _sigmoid(2.0 * x)
    rate = np.where(y[:, None] == 1, channel.tpr, channel.fpr)
    labels = (rng.random((n_items, channel.n_annotators)) < rate).astype(np.int8)
    data = AnnotationSet(labels, z, np.arange(n_items).astype(object),
                         np.arange(channel.n_annotators).astype(object))
    return data, y, m


def _metrics(p, y, m):
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return dict(l1=float(np.mean(np.abs(p - m))), log_loss=float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p))),
                brier=float(np.mean((p - y) ** 2)))


def gaussian_recalibration(*, sizes=SIZES, n_reps: int = 60, fpr=FPR, tpr=TPR, maps=MAPS, bayes: bool = False,
                           bayes_reps: int | None = None, n_warmup: int = 300, n_draws: int = 300,
                           level: float = 0.9, seed: int = 0, progress_bar: bool = False) -> pd.DataFrame:
    """Run the Gaussian recalibration experiment; one row per (n_items, rep, map, fit).

    Parameters
    ----------
    sizes : total sample sizes (split in thirds), default the paper's (1500, 3000, 6000, 12000)
    n_reps : repetitions per size, default 60 (the paper's)
    fpr, tpr : channels of the two annotators
    maps : subset of ``("temperature", "platt", "histogram")``
    bayes, bayes_reps, n_warmup, n_draws, level : the Bayesian rows (docs/foundations.md), for the first
        ``bayes_reps`` repetitions of each size
    seed : int; repetition ``r`` of size ``n`` uses ``SeedSequence([seed, n, r])``
    progress_bar : bool, default False
        A bar over the repetitions of each cell (only in a terminal); the rows are the same either way.

    Returns
    -------
    DataFrame with columns ``n_items, rep, map, fit, l1, log_loss, brier, failure`` (and ``band_coverage``
    for Bayesian rows). A repetition whose channels are not identified on the channel third gives
    ``corrected`` rows with NaN metrics and the reason in ``failure``.
    """
    rows = []
    for n in sizes:
        for r in progress(range(n_reps), enabled=progress_bar, desc=f"gaussian n={int(n)}"):
            s = int(np.random.SeedSequence([seed, int(n), r]).generate_state(1)[0])
            data, y, m = simulate_gaussian(int(n), fpr=fpr, tpr=tpr, seed=s)
            perm = np.random.default_rng(s).permutation(int(n))
            thirds = [np.sort(p) for p in np.array_split(perm, 3)]
            ch_data, re_data = data.subset(thirds[0]), data.subset(thirds[1])
            te = thirds[2]
            z_re, z_te = re_data.scores, data.scores[te]
            base = dict(n_items=int(n), rep=r)
            rows.append(dict(base, map="base", fit="none", failure="", **_metrics(z_te, y[te], m[te])))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = fit_em(ch_data, groups=Binning.equal_mass(N_GROUPS), n_starts=5)
                targets = {"naive": re_data.vote_fraction(), "oracle": y[thirds[1]].astype(float)}
                # The paper's protocol: an unconverged fit (converged=False) counts as failed.
                failure = ("" if est.identified and est.channel is not None and est.converged
                           else (est.reason or "not identified"))
                if not failure:
                    targets["corrected"] = corrected_item_labels(re_data, est.channel).values
                for kind in maps:
                    for fit_kind in FITS:
                        if fit_kind not in targets:
                            rows.append(dict(base, map=kind, fit=fit_kind, failure=failure, l1=np.nan,
                                             log_loss=np.nan, brier=np.nan))
                            continue
                        f = fit_point_map(kind, z_re, targets[fit_kind])
                        rows.append(dict(base, map=kind, fit=fit_kind, failure="",
                                         **_metrics(f(z_te), y[te], m[te])))
                if bayes and (bayes_reps is None or r < bayes_reps):
                    rows.extend(_bayes_rows(base, ch_data, re_data, z_te, y[te], m[te], n_warmup, n_draws, level, s))
    return pd.DataFrame(rows)


def _bayes_rows(base, ch_data, re_data, z_te, y_te, m_te, n_warmup, n_draws, level, seed):
    from ..inference import fit_nuts
    from ..recalibration.posterior import PosteriorHistogram, PosteriorTemperature

    out = []
    seed = seed % (2**31)
    ch_post = fit_nuts(ch_data, model="grouped", groups=Binning.equal_mass(N_GROUPS), n_chains=2, n_warmup=n_warmup, n_draws=n_draws,
                       seed=seed, progress_bar=False)
    hist_post = fit_nuts(re_data, model="histogram", groups=Binning.equal_width(N_BINS), n_chains=2,
                         n_warmup=n_warmup, n_draws=n_draws, seed=seed, progress_bar=False)
    for kind, mapper in (("temperature", PosteriorTemperature(n_draws=200, seed=seed).fit(re_data, ch_post)),
                         ("histogram", PosteriorHistogram(n_draws=200).fit(re_data, hist_post))):
        lo, hi = mapper.predict_interval(z_te, level=level)
        out.append(dict(base, map=kind, fit="bayes", failure="", band_coverage=float(np.mean((lo <= m_te) & (m_te <= hi))),
                        **_metrics(mapper.predict(z_te), y_te, m_te)))
    return out


def summarise_gaussian(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd and Monte Carlo SE of each metric per (n_items, map, fit), in the paper's layout."""
    keys = ["n_items", "map", "fit"]
    ok = frame[np.isfinite(frame["l1"])]
    parts = []
    for metric in ("l1", "log_loss", "brier"):
        s = mc_summary(ok, keys, metric)
        parts.append(s.rename(columns={"mean": metric, "sd": f"{metric}_sd", "mc_se": f"{metric}_se"})
                     .drop(columns="n_reps") if metric != "l1" else
                     s.rename(columns={"mean": metric, "sd": f"{metric}_sd", "mc_se": f"{metric}_se"}))
    out = parts[0].merge(parts[1], on=keys).merge(parts[2], on=keys)
    if "band_coverage" in frame:
        cov = frame.groupby(keys, sort=False)["band_coverage"].mean().rename("band_coverage").reset_index()
        out = out.merge(cov, on=keys, how="left")
    return out
