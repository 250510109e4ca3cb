"""The project's real data sets as command-line input: every set of the shared data folder, ready for ``evaluate``.

:func:`shared_data_dir` finds the folder (``NOISYCAL_SHARED_DATA``, else ``../shared/data`` beside the checkout);
:func:`write_real_set` writes one set. Crowds without scores get synthetic scores drawn from gold, seeded by the set's
name. Details: docs/foundations.md, *noisycal_bayes.experiments.real_data*.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: Environment variable naming the shared data folder (the folder holding ``cifar10n_vehicle.csv``).
SHARED_DATA_ENV = "NOISYCAL_SHARED_DATA"
#: Logit advantage of the gold class in the synthetic scores of the crowds (docs/foundations.md).
SEPARATION = 2.0

#: What to do when the shared data folder is not found (for skip messages and errors).
SHARED_DATA_HINT = (f"set the environment variable {SHARED_DATA_ENV} to the shared data folder, or clone the project "
                    "beside shared/ (../shared/data relative to the checkout)")

#: The reference figures :func:`reference_figures` returns (and :func:`write_real_set` with them).
REFERENCE_KEYS = ("reference_ece", "reference_ece_debiased", "reference_lower", "reference_upper")

__all__ = ["REAL_SETS", "REFERENCE_KEYS", "SEPARATION", "SHARED_DATA_ENV", "SHARED_DATA_HINT", "RealSet",
           "reference_figures", "shared_data_dir", "shared_data_path", "write_real_set"]


@dataclass(frozen=True)
class RealSet:
    """One real data set: its file (relative to the shared folder), layout and number of classes."""

    name: str
    path: str
    layout: str  # "cifar_binary", "cifar_classes", or "crowd" (long item, annotator/worker, label, gold)
    n_classes: int
    annotator_col: str = "annotator"


#: Every set of the shared data folder, in the order the matrix runs them.
REAL_SETS = {s.name: s for s in (
    RealSet("cifar10n_vehicle", "cifar10n_vehicle.csv", "cifar_binary", 2),
    RealSet("cifar10n_10class", "cifar10n_10class.csv", "cifar_classes", 10),
    RealSet("bluebirds", "crowd_gold/bluebirds.csv", "crowd", 2, "worker"),
    RealSet("rte", "crowd_gold/rte.csv", "crowd", 2, "worker"),
    RealSet("temp", "crowd_gold/temp.csv", "crowd", 2, "worker"),
    RealSet("zencrowd_us", "crowds/zencrowd_us.csv", "crowd", 2),
    RealSet("sp", "crowds/sp.csv", "crowd", 2),
    RealSet("cf", "crowds/cf.csv", "crowd", 5),
    RealSet("ms", "crowds/ms.csv", "crowd", 10),
    RealSet("adult", "crowds/adult.csv", "crowd", 4),
)}


def shared_data_dir() -> Path | None:
    """The shared data folder, or None when it cannot be found.

    ``$NOISYCAL_SHARED_DATA`` when set (it must then be an existing folder), else ``../shared/data`` relative
    to the checkout holding this package (an editable install of a clone with ``shared/`` beside it).

    Raises
    ------
    FileNotFoundError
        ``NOISYCAL_SHARED_DATA`` is set but names no folder.
    """
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"the environment variable {SHARED_DATA_ENV} names {env!r}, which is not a "
                                    "folder; point it at the shared data folder (the one holding "
                                    "cifar10n_vehicle.csv) or unset it.")
        return path
    path = Path(__file__).resolve().parents[3] / "shared" / "data"
    return path if path.is_dir() else None


def shared_data_path(relpath: str) -> Path | None:
    """A file of the shared data folder (say ``"crowd_gold/rte.csv"``), or None when the folder or the file is absent.

    Tests and benchmarks that need shared data call this and skip, saying why (:data:`SHARED_DATA_HINT`), on None.
    """
    root = shared_data_dir()
    if root is None:
        return None
    path = root / relpath
    return path if path.exists() else None


def _synthetic_probs(classes: np.ndarray, n_classes: int, seed_name: str) -> np.ndarray:
    """Synthetic class probabilities of docs/foundations.md, (n, K), from classes (n,)."""
    rng = np.random.default_rng(zlib.crc32(seed_name.encode()))
    logits = rng.standard_normal((classes.size, n_classes))
    logits[np.arange(classes.size), classes] += SEPARATION
    logits -= logits.max(axis=1, keepdims=True)  # stable softmax
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def _crowd_classes(frame: pd.DataFrame, n_classes: int) -> pd.Series:
    """Per item: the gold class, or the majority vote (ties to the smallest class) where gold is -1."""
    gold = frame.groupby("item")["gold"].first()
    counts = pd.crosstab(frame["item"], frame["label"]).reindex(columns=range(n_classes), fill_value=0)
    vote = pd.Series(np.argmax(counts.to_numpy(), axis=1), index=counts.index)
    return gold.where(gold >= 0, vote.reindex(gold.index)).astype(np.int64)


def reference_figures(scores, gold, n_classes: int) -> dict:
    """The calibration error of ``scores`` against gold labels: plug-in, and on the headline's target with its interval.

    Binary (``scores`` of shape (n,), the probability of class 1): 10 equal-width bins; K classes (``scores`` of
    shape (n, K)): the top-label error on 15 equal-width confidence bins, as ``evaluate``'s headline.

    ``reference_ece`` is the plug-in binned ECE against gold (:func:`noisycal_bayes.reference.calibration.ece`,
    :func:`noisycal_bayes.core.top_label_ece`): the *sample oracle ECE* of DESIGN §2, biased upwards as an
    estimate of the population error (each bin's ``|mean(y - z)|`` carries its labels' noise).
    ``reference_ece_debiased``, ``reference_lower`` and ``reference_upper`` are the headline's own estimator with
    gold as a noiseless annotator (channel ``fpr = 0, tpr = 1``; identity confusion): the debiased estimate and
    90% interval of :func:`noisycal_bayes.propagate.posterior_nc_ece` (K: ``posterior_top_label_nc_ece``), whose
    target is the headline's, the *population* binned ECE on the same bins (``seed`` 0, 1000 Bayesian-bootstrap
    draws), read as ``evaluate`` reads the headline (``[0, upper bound]`` where the data cannot tell the error from
    0). What the two differ by on the real sets: docs/crowds.md, *Synthetic scores for the crowds*.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.uniform(size=400)
    >>> ref = reference_figures(z, (rng.uniform(size=400) < z).astype(int), 2)  # calibrated: both near 0
    >>> ref["reference_ece_debiased"] <= ref["reference_ece"]
    True
    """
    from ..core import top_label_ece
    from ..data import AnnotationSet, Binning, Channel
    from ..propagate import posterior_nc_ece, posterior_top_label_nc_ece
    from ..reference.calibration import ece

    gold = np.asarray(gold, dtype=np.int64)
    if n_classes == 2:
        scores = np.asarray(scores, dtype=np.float64)
        plug = ece(scores, gold, bins=10)
        post = posterior_nc_ece(AnnotationSet.from_wide(gold[:, None], scores), Channel([0.0], [1.0]),
                                bins=Binning.equal_width(10), seed=0)
    else:
        probs = np.asarray(scores, dtype=np.float64)
        plug = top_label_ece(probs, np.eye(n_classes)[gold], bins=15).value
        n = gold.size
        post = posterior_top_label_nc_ece(probs, (np.arange(n), np.zeros(n, np.int64), gold),
                                          np.eye(n_classes)[None], bins=15, seed=0)
    lower, upper = post.reported_interval  # as the headline reads it: [0, upper bound] near 0
    return dict(reference_ece=float(plug), reference_ece_debiased=float(post.debiased),
                reference_lower=float(lower), reference_upper=float(upper))


def write_real_set(name: str, out_dir, *, n_items: int | None = None, root=None) -> dict:
    """Write one real set as ``noisycal-bayes evaluate`` input; return its arguments and reference figures.

    Parameters
    ----------
    name : str
        A key of :data:`REAL_SETS`.
    out_dir : path-like
        Folder for the written files (created).
    n_items : int, optional
        Keep the first ``n_items`` items (in the file's order of first appearance); default all.
    root : path-like, optional
        The shared data folder; default :func:`shared_data_dir`.

    Returns
    -------
    dict
        ``args`` (the CLI arguments after ``evaluate``, as strings), ``n_items``, ``n_classes``,
        ``n_annotators``, ``n_labels``, the :data:`REFERENCE_KEYS` of :func:`reference_figures` on the items with
        reference labels (``reference_ece``, the plug-in 10-bin ECE of the scores against them, K classes the
        15-bin top-label ECE; ``reference_ece_debiased``, ``reference_lower``, ``reference_upper``, the same on
        the headline's target: NaN where no item has gold), ``reference`` (what the reference labels are) and
        ``synthetic_scores`` (bool).

    Raises
    ------
    KeyError
        ``name`` is not a known set.
    FileNotFoundError
        No shared data folder, or the set's file is missing from it.
    """
    if name not in REAL_SETS:
        raise KeyError(f"unknown real set {name!r}; choose from {list(REAL_SETS)}.")
    spec = REAL_SETS[name]
    root = Path(root) if root is not None else shared_data_dir()
    if root is None:
        raise FileNotFoundError(f"no shared data folder: {SHARED_DATA_HINT}.")
    src = root / spec.path
    if not src.is_file():
        raise FileNotFoundError(f"{spec.path} is missing from the shared data folder {str(root)!r}.")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ann_path = out / f"{name}.csv"
    frame = pd.read_csv(src)
    if spec.layout in ("cifar_binary", "cifar_classes"):
        if n_items is not None:
            frame = frame.iloc[:n_items]
        cols = ["ann1", "ann2", "ann3"]
        n_lab = int(frame[cols].notna().to_numpy().sum())
        info = dict(n_items=len(frame), n_classes=spec.n_classes, n_annotators=3, n_labels=n_lab,
                    synthetic_scores=False, reference="original CIFAR-10 labels (y_ref)")
        if spec.layout == "cifar_binary":
            frame[["item", "score", *cols]].to_csv(ann_path, index=False)
            info.update(reference_figures(frame["score"].to_numpy(), frame["y_ref"].to_numpy(), 2))
            info["args"] = [str(ann_path), "--annotators", ",".join(cols)]
        else:
            probs = frame[[f"p{k}" for k in range(10)]].to_numpy(np.float64)
            frame[["item", *cols]].to_csv(ann_path, index=False)
            score_path = out / f"{name}_probs.csv"
            pd.DataFrame(probs, columns=[str(k) for k in range(10)]).assign(item=frame["item"].to_numpy())[
                ["item", *map(str, range(10))]].to_csv(score_path, index=False)
            info.update(reference_figures(probs, frame["y_ref"].to_numpy(), 10))
            info["args"] = [str(ann_path), "--scores", str(score_path), "--annotators", ",".join(cols)]
        return info
    frame = frame.rename(columns={spec.annotator_col: "annotator"})
    if n_items is not None:
        keep = pd.unique(frame["item"])[:n_items]
        frame = frame[frame["item"].isin(keep)]
    k = spec.n_classes
    classes = _crowd_classes(frame, k)
    probs = _synthetic_probs(classes.to_numpy(), k, name)
    frame[["item", "annotator", "label"]].to_csv(ann_path, index=False)
    score_path = out / f"{name}_scores.csv"
    if k == 2:
        pd.DataFrame({"item": classes.index, "score": probs[:, 1]}).to_csv(score_path, index=False)
    else:
        pd.DataFrame(probs, columns=[str(c) for c in range(k)]).assign(item=classes.index)[
            ["item", *map(str, range(k))]].to_csv(score_path, index=False)
    gold = frame.groupby("item")["gold"].first().reindex(classes.index).to_numpy()
    has = gold >= 0
    if has.any():
        ref = reference_figures(probs[has, 1] if k == 2 else probs[has], gold[has], k)
    else:
        ref = dict.fromkeys(REFERENCE_KEYS, float("nan"))
    return dict(args=[str(ann_path), "--scores", str(score_path)], n_items=int(classes.size),
                n_classes=k, n_annotators=int(frame["annotator"].nunique()), n_labels=int(len(frame)),
                **ref, synthetic_scores=True,
                reference=f"gold labels ({int(has.sum())} of {int(classes.size)} items)")
