"""Semi-synthetic tabular recalibration (paper §6.2, Table 2; Appendix G.3).

Four scikit-learn data sets, simulated annotators with class-conditional channels (:data:`REGIMES`), channels by the
reference grouped EM, temperature / Platt / histogram maps fitted corrected, naive and oracle, scored by binned ECE
against the clean test labels. The protocol step by step: docs/foundations.md, *noisycal_bayes.experiments.tabular*.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from .._progress import progress
from ..data import AnnotationSet
from ..reference import ece, fit_em
from ..reference.recalibration import corrected_item_labels
from ._common import N_BINS, N_GROUPS, fit_point_map
from ..data.binning import Binning

#: The four data sets: name -> (scikit-learn loader, binarisation of the original target).
DATASETS = {
    "breast_cancer": ("load_breast_cancer", "benign (target 1) vs malignant"),
    "digits": ("load_digits", "digit >= 5 vs digit <= 4"),
    "diabetes": ("load_diabetes", "disease progression > median (140.5) vs <= median"),
    "wine": ("load_wine", "cultivar 1 (target 1) vs cultivars 0 and 2"),
}
#: Predictor families (scikit-learn estimators with default settings unless stated in :func:`make_predictor`).
PREDICTORS = ("logistic", "naive_bayes", "random_forest", "gradient_boosting", "knn", "decision_tree")
#: Noise regimes: (fpr range, fnr range); each annotator draws its own fpr and fnr uniformly.
REGIMES = {
    "low": ((0.05, 0.15), (0.05, 0.15)),
    "moderate": ((0.10, 0.25), (0.10, 0.25)),
    "high": ((0.20, 0.35), (0.20, 0.35)),
    "asymmetric": ((0.02, 0.08), (0.20, 0.40)),
}
N_ANNOTATORS = (3, 5, 7)
MAPS = ("temperature", "platt", "histogram")
FITS = ("corrected", "naive", "oracle")


def _sklearn():
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the tabular experiment needs scikit-learn (its bundled data sets and predictors); "
                          "install it with `pip install noisycal_bayes[experiments]`.") from exc
    import sklearn.datasets

    return sklearn


def load_tabular(name: str):
    """``(X, y)`` of one bundled data set made binary as :data:`DATASETS` states.

    Parameters
    ----------
    name : one of ``"breast_cancer", "digits", "diabetes", "wine"``

    Returns
    -------
    X : ndarray of shape (n_items, n_features), float64
    y : ndarray of shape (n_items,), int8 in {0, 1}

    Raises
    ------
    ImportError
        scikit-learn is missing (``pip install noisycal_bayes[experiments]``).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; expected one of {sorted(DATASETS)}.")
    sk = _sklearn()
    bunch = getattr(sk.datasets, DATASETS[name][0])()
    X, t = np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)
    if name == "breast_cancer":
        y = t == 1
    elif name == "digits":
        y = t >= 5
    elif name == "diabetes":
        y = t > np.median(t)
    else:
        y = t == 1
    return X, y.astype(np.int8)


def make_predictor(family: str, seed: int):
    """An unfitted scikit-learn classifier of one predictor family of :data:`PREDICTORS`.

    ``logistic``: standardise + ``LogisticRegression(max_iter=2000)``; ``naive_bayes``: ``GaussianNB``;
    ``random_forest``: 100 trees; ``gradient_boosting``: ``GradientBoostingClassifier`` (100 stages);
    ``knn``: standardise + 15 nearest neighbours; ``decision_tree``: depth 4.
    """
    _sklearn()  # checks the import with a clear message
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    if family == "logistic":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    if family == "naive_bayes":
        return GaussianNB()
    if family == "random_forest":
        return RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1)
    if family == "gradient_boosting":
        return GradientBoostingClassifier(random_state=seed)
    if family == "knn":
        return make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=15))
    if family == "decision_tree":
        return DecisionTreeClassifier(max_depth=4, random_state=seed)
    raise ValueError(f"unknown predictor family {family!r}; expected one of {PREDICTORS}.")


def simulate_channels(n_annotators: int, regime: str, rng):
    """Annotator-specific ``(fpr, tpr)`` arrays of shape (n_annotators,) drawn from a regime of :data:`REGIMES`."""
    if regime not in REGIMES:
        raise ValueError(f"unknown noise regime {regime!r}; expected one of {sorted(REGIMES)}.")
    (f_lo, f_hi), (n_lo, n_hi) = REGIMES[regime]
    fpr = rng.uniform(f_lo, f_hi, n_annotators)
    fnr = rng.uniform(n_lo, n_hi, n_annotators)
    return fpr, 1.0 - fnr


def _annotator_key(n_annotators):
    """Seed key of an annotator count: its index in :data:`N_ANNOTATORS`, else ``100 + J`` (fixed per J)."""
    return N_ANNOTATORS.index(n_annotators) if n_annotators in N_ANNOTATORS else 100 + int(n_annotators)


def _regime_key(regime):
    """Seed key of a regime: its index in :data:`REGIMES` (unknown names fail in :func:`simulate_channels`)."""
    return list(REGIMES).index(regime) if regime in REGIMES else len(REGIMES)


def _split(y, fractions, rng):
    """Stratified split of ``range(n)`` into parts with the given fractions (per class, shuffled)."""
    parts = [[] for _ in fractions]
    cum = np.cumsum(fractions) / np.sum(fractions)
    for c in (0, 1):
        idx = rng.permutation(np.flatnonzero(y == c))
        cuts = np.round(cum * idx.size).astype(int)
        for k, (a, b) in enumerate(zip(np.r_[0, cuts[:-1]], cuts)):
            parts[k].append(idx[a:b])
    return [np.sort(np.concatenate(p)) for p in parts]


def tabular_recalibration(*, datasets=tuple(DATASETS), predictors=PREDICTORS, n_annotators=N_ANNOTATORS,
                          regimes=tuple(REGIMES), n_seeds: int = 10, seeds=None, fractions=(0.4, 0.3, 0.3), maps=MAPS,
                          n_starts: int = 5, point: bool = True, bayes: bool = False, bayes_seeds: int = 1, bayes_n_annotators=(3,),
                          n_warmup: int = 300, n_draws: int = 300, level: float = 0.9,
                          seed: int = 0, progress_bar: bool = False) -> pd.DataFrame:
    """Run the semi-synthetic tabular experiment; one row per (dataset, seed, predictor, J, regime, method).

    Parameters
    ----------
    datasets : names of :data:`DATASETS`
    predictors : names of :data:`PREDICTORS`
    n_annotators : annotator counts ``J``, default (3, 5, 7)
    regimes : names of :data:`REGIMES`
    n_seeds : int, default 10 (the paper's ten seeds: 6 predictors x 10 seeds x 3 counts x 4 regimes =
        720 cells per data set, as in the paper's Appendix G.3)
    seeds : sequence of int, optional
        Run exactly these seeds instead of ``range(n_seeds)`` (e.g. one at a time, to checkpoint).
    fractions : (train, fit, test) shares of the stratified split
    maps : subset of ``("temperature", "platt", "histogram")``
    n_starts : random EM starts per channel fit (``reference.fit_em`` adds no moment start)
    point : bool, default True
        Emit the base and point-map rows; ``point=False, bayes=True`` gives only the Bayesian rows (to
        add them to an earlier point run of the same seeds).
    bayes : bool
        Add ``platt / bayes`` rows (PosteriorPlatt by NUTS, 2 chains) for seeds ``< bayes_seeds`` and
        annotator counts in ``bayes_n_annotators``.
    n_warmup, n_draws, level : NUTS settings per chain and the band level of the Bayesian rows
    seed : int; data set ``d``, seed ``s`` uses ``SeedSequence([seed, d, s])``; the annotations of a
        (J, regime) cell are keyed by J's and the regime's place in :data:`N_ANNOTATORS` / :data:`REGIMES`,
        and data sets and predictors by their place in :data:`DATASETS` / :data:`PREDICTORS`, so a run on
        a subset of data sets, predictors, counts or regimes reproduces the same cells of the full run
    progress_bar : bool, default False
        A bar over the seeds of each data set (only in a terminal); the rows are the same either way.

    Returns
    -------
    DataFrame with columns ``dataset, seed, predictor, n_annotators, regime, map, fit, ece, failure``
    (``map="base", fit="none"`` for the predictor itself; ``failure`` non-empty and ``ece`` NaN for every
    recalibrated row of a cell whose channel fit failed), plus ``n_fit, n_test`` and, for Bayesian rows,
    ``band_width`` (mean width of the pointwise ``level`` band on the test scores).

    Raises
    ------
    ImportError
        scikit-learn is missing (``pip install noisycal_bayes[experiments]``).
    """
    _sklearn()
    rows = []
    for name in datasets:
        X, y = load_tabular(name)
        di = list(DATASETS).index(name)
        seed_list = list(range(n_seeds) if seeds is None else seeds)
        for s in progress(seed_list, enabled=progress_bar, desc=f"tabular {name}"):
            ss = np.random.SeedSequence([seed, di, s])
            split_seed, pred_seed, noise_seed = (int(q.generate_state(1)[0]) for q in ss.spawn(3))
            tr, fi, te = _split(y, fractions, np.random.default_rng(split_seed))
            annotations = {}
            for J in n_annotators:
                for reg in regimes:
                    rng = np.random.default_rng([noise_seed, _annotator_key(J), _regime_key(reg)])
                    fpr, tpr = simulate_channels(int(J), reg, rng)
                    rate = np.where(y[fi][:, None] == 1, tpr, fpr)
                    annotations[(J, reg)] = (rng.random(rate.shape) < rate).astype(np.int8)
            for fam in predictors:
                pi = PREDICTORS.index(fam) if fam in PREDICTORS else len(PREDICTORS)
                clf = make_predictor(fam, pred_seed % (2**31) + pi)
                clf.fit(X[tr], y[tr])
                z_fit = np.clip(clf.predict_proba(X[fi])[:, 1], 0.0, 1.0)
                z_te = np.clip(clf.predict_proba(X[te])[:, 1], 0.0, 1.0)
                base_ece = ece(z_te, y[te], bins=N_BINS)
                for (J, reg), labels in annotations.items():
                    cell = dict(dataset=name, seed=s, predictor=fam, n_annotators=int(J), regime=reg,
                                n_fit=int(fi.size), n_test=int(te.size))
                    data = AnnotationSet(labels, z_fit, np.arange(fi.size).astype(object),
                                         np.arange(int(J)).astype(object))
                    if point:
                        rows.append(dict(cell, map="base", fit="none", ece=base_ece, failure=""))
                        rows.extend(_cell_rows(cell, data, z_te, y[fi], y[te], maps, n_starts, s))
                    if bayes and s < bayes_seeds and J in bayes_n_annotators:
                        rows.append(_bayes_row(cell, data, z_te, y[te], n_warmup, n_draws, level, split_seed))
    return pd.DataFrame(rows)


def _cell_rows(cell, data, z_te, y_fit, y_te, maps, n_starts, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fit_em(data, groups=Binning.equal_mass(N_GROUPS), n_starts=n_starts, seed=seed)
    # The paper's protocol: an unconverged fit (converged=False) counts as failed.
    failure = ("" if est.identified and est.channel is not None and est.converged
               else (est.reason or "not identified"))
    targets = {}
    if not failure:
        targets = {"corrected": corrected_item_labels(data, est.channel).values,
                   "naive": data.vote_fraction(), "oracle": y_fit.astype(np.float64)}
    out = []
    for kind in maps:
        for fit_kind in FITS:
            row = dict(cell, map=kind, fit=fit_kind, failure=failure, ece=np.nan)
            if not failure:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    predict = fit_point_map(kind, data.scores, targets[fit_kind])
                row["ece"] = ece(np.clip(predict(z_te), 0.0, 1.0), y_te, bins=N_BINS)
            out.append(row)
    return out


def _bayes_row(cell, data, z_te, y_te, n_warmup, n_draws, level, seed):
    from ..inference import fit_nuts
    from ..recalibration import PosteriorPlatt

    row = dict(cell, map="platt", fit="bayes", failure="", ece=np.nan, band_width=np.nan)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            post = fit_nuts(data, model="platt", n_chains=2, n_warmup=n_warmup, n_draws=n_draws,
                            seed=seed % (2**31), progress_bar=False)
            mapper = PosteriorPlatt().fit(data, post)
            lo, hi = mapper.predict_interval(z_te, level=level)
        row["ece"] = ece(np.clip(mapper.predict(z_te), 0.0, 1.0), y_te, bins=N_BINS)
        row["band_width"] = float(np.mean(hi - lo))
    except ValueError as exc:  # recorded, not hidden
        row["failure"] = str(exc)
    return row


def summarise_tabular(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 2 layout: per (dataset, map, fit) the mean and sample sd of the seed-level mean ECE.

    A cell (dataset, seed, predictor, J, regime) whose channel fit failed is dropped for every method,
    so all methods are compared on the same cells (``failure`` empty or NaN, as read back from CSV, means
    success). Columns: ``dataset, map, fit, ece, ece_sd, n_seeds,
    n_cells, n_failed`` and the paired comparison with the base: ``diff_vs_base`` (method minus base,
    mean over seeds of the seed-level differences), ``diff_se`` (its sd / sqrt(n_seeds)) and
    ``reduces`` (``diff_vs_base < 0``). A ``dataset="all"`` block pools the data sets (seed-level means
    over all their cells).
    """
    keys = ["dataset", "seed", "predictor", "n_annotators", "regime"]
    point = frame[frame["fit"] != "bayes"]
    failed = point.groupby(keys)["failure"].apply(lambda f: bool((f.notna() & (f.astype(str) != "")).any()))
    failed = failed.rename("failed").reset_index()
    ok = frame.merge(failed, on=keys)
    n_failed = failed.groupby("dataset")["failed"].sum()
    n_cells = failed.groupby("dataset").size()
    ok = ok[~ok["failed"] & np.isfinite(ok["ece"])]
    pooled = ok.assign(dataset="all")
    parts = []
    for block in (ok, pooled):
        seed_means = block.groupby(["dataset", "map", "fit", "seed"], sort=False)["ece"].mean().rename("ece")
        seed_means = seed_means.reset_index()
        base = seed_means[seed_means["map"] == "base"][["dataset", "seed", "ece"]].rename(columns={"ece": "base"})
        seed_means = seed_means.merge(base, on=["dataset", "seed"])
        seed_means["diff"] = seed_means["ece"] - seed_means["base"]
        g = seed_means.groupby(["dataset", "map", "fit"], sort=False)
        t = pd.DataFrame({"ece": g["ece"].mean(), "ece_sd": g["ece"].std(ddof=1), "n_seeds": g["ece"].count(),
                          "diff_vs_base": g["diff"].mean(), "diff_sd": g["diff"].std(ddof=1)}).reset_index()
        cells = block.groupby(["dataset", "map", "fit"], sort=False).size().rename("n_cells").reset_index()
        parts.append(t.merge(cells, on=["dataset", "map", "fit"]))
    out = pd.concat(parts, ignore_index=True)
    out["diff_se"] = out["diff_sd"] / np.sqrt(out["n_seeds"])
    out["reduces"] = out["diff_vs_base"] < 0
    out["n_failed"] = out["dataset"].map(lambda d: int(n_failed.sum() if d == "all" else n_failed.get(d, 0)))
    out["n_cells_total"] = out["dataset"].map(lambda d: int(n_cells.sum() if d == "all" else n_cells.get(d, 0)))
    if "band_width" in frame:
        b = frame[frame["fit"] == "bayes"]
        bw = b.groupby("dataset")["band_width"].mean()
        bw["all"] = b["band_width"].mean()
        out["band_width"] = [bw.get(d, np.nan) if f == "bayes" else np.nan for d, f in zip(out["dataset"], out["fit"])]
    return out.drop(columns="diff_sd")
