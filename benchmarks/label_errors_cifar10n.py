"""Label errors, corrected accuracy and model comparison on CIFAR-10N "vehicle vs animal" (real data).

Data: cifar10n_vehicle.csv of the shared data folder (50,000 CIFAR-10 training images, three CIFAR-10N human labels
each, binarised). Labels: CIFAR-10N, Wei et al., "Learning with Noisy Labels Revisited: A Study Using
Real-World Human Annotations", ICLR 2022 (UCSC-REAL/cifar-10-100n, CC BY-NC 4.0). Scores: cross-validated
ResNet-50 probabilities published with confident learning (cgnorthcutt/confidentlearning-reproduce, MIT).
``y_ref`` (the original CIFAR-10 label) is used only to evaluate, never to fit.

Sections (each writes CSVs to benchmarks/results/; figures go to docs/figures/):

1. *Model choice* (simulation): precision at k of the P(majority wrong) ranking under several channel
   models, to choose the default of ``label_issues``.
2. *Ranking* (real data): precision / recall at top-k against ``y_ref`` of
   - our ranking (``label_issues``, several fits, and ``annotation_posteriors`` for annotator 1),
   - confident learning (normalised margin; given label = majority vote, or annotator 1 alone),
   - majority disagreement (fraction of annotators disagreeing with the majority).
3. *Accuracy*: corrected accuracy of the classifier at 0.5 vs its accuracy against ``y_ref``.
4. *Comparison*: ``compare_models`` on the classifier and two altered versions of it, against the truth.

5. *Circularity* (simulation): bias of accuracy estimates that reuse one model's scores.

Run: ``.venv/bin/python benchmarks/label_errors_cifar10n.py [--quick] [--no-nuts] [--sections ...]``
(about 15-30 minutes on 2 cores, most of it the model-choice simulation and the NUTS fits).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from noisycal_bayes import AnnotationSet, simulate_annotations
from noisycal_bayes.experiments.real_data import shared_data_path
from noisycal_bayes.data import Binning
from noisycal_bayes.inference import fit_em, fit_map, fit_nuts
from noisycal_bayes.labels import (annotation_posteriors, compare_models, corrected_accuracy, default_issue_fit,
                                   label_issues)
from noisycal_bayes.labels.accuracy import threshold_bins
from noisycal_bayes.labels.compare import comparison_groups, joint_prediction_groups
from noisycal_bayes.reference.calibration import ece
from noisycal_bayes.reference.confident_learning import confident_learning

ROOT = Path(__file__).resolve().parents[1]
DATA = shared_data_path("cifar10n_vehicle.csv") or Path("cifar10n_vehicle.csv")
RESULTS = ROOT / "benchmarks" / "results"
FIGURES = ROOT / "docs" / "figures"
ANNOTATORS = ["ann1", "ann2", "ann3"]


# ----------------------------------------------------------------------------- ranking metrics
def precision_recall_at_k(score, target, ks):
    """Expected precision and recall at each k when ties in ``score`` are broken at random.

    Items strictly above the k-th score all count; the tie block at the cut contributes its mean.
    """
    s = np.asarray(score, dtype=np.float64)
    t = np.asarray(target, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    rows = []
    for k in ks:
        thr = s[order[k - 1]]
        above, tie = s > thr, s == thr
        hits = t[above].sum() + (k - above.sum()) * t[tie].mean()
        rows.append((k, hits / k, hits / t.sum()))
    return rows


def paired_difference(score_a, score_b, target, k, rng):
    """Precision at k of ranking a minus ranking b, with a McNemar-type standard error.

    Top-k sets with ties at the cut broken at random (``rng``); only items in one set and not the other
    differ: ``d = (hits in a\\b - hits in b\\a) / k``, ``se^2 = (n_ab p_ab (1-p_ab) + n_ba p_ba (1-p_ba)) / k^2``.
    """
    t = np.asarray(target, dtype=bool)
    sets = []
    for s in (score_a, score_b):
        order = np.lexsort((rng.random(t.size), -np.asarray(s, dtype=np.float64)))
        m = np.zeros(t.size, dtype=bool)
        m[order[:k]] = True
        sets.append(m)
    a, b = sets
    ab, ba = a & ~b, b & ~a
    p_ab = t[ab].mean() if ab.any() else 0.0
    p_ba = t[ba].mean() if ba.any() else 0.0
    d = (t[ab].sum() - t[ba].sum()) / k
    se = np.sqrt(ab.sum() * p_ab * (1 - p_ab) + ba.sum() * p_ba * (1 - p_ba)) / k
    return float(d), float(se)


def rank_table(rankings: dict, target, ks, task: str) -> pd.DataFrame:
    rows = []
    for name, score in rankings.items():
        for k, prec, rec in precision_recall_at_k(score, target, ks):
            rows.append({"task": task, "ranking": name, "k": k, "precision": prec, "recall": rec,
                         "precision_se": np.sqrt(prec * (1 - prec) / k)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- 1. model choice
def model_choice(n_items=4000, seeds=(0, 1, 2, 3), quick=False):
    settings = {
        "calibrated, beta(0.5,0.5) scores": dict(fpr=[0.1, 0.15, 0.2], tpr=[0.85, 0.8, 0.9], curve="calibrated",
                                                  score_beta=(0.5, 0.5)),
        "overconfident, noisy annotators": dict(fpr=[0.2, 0.25, 0.3], tpr=[0.75, 0.8, 0.7], curve="overconfident",
                                                score_beta=(1, 1)),
        "shifted curve": dict(fpr=[0.1, 0.15, 0.2], tpr=[0.85, 0.8, 0.9], curve="shifted", score_beta=(0.7, 0.7)),
        "wiggly (nonlinear) curve": dict(fpr=[0.1, 0.15, 0.2], tpr=[0.85, 0.8, 0.9], curve="nonlinear",
                                         score_beta=(1, 1)),
        "CIFAR-like: sharp scores, good annotators": dict(fpr=[0.03, 0.04, 0.05], tpr=[0.96, 0.95, 0.97],
                                                          curve="calibrated", score_beta=(0.05, 0.07)),
    }
    if quick:
        seeds = seeds[:2]
    fits = {
        "marginal (no scores)": lambda d: fit_em(d, model="dawid_skene", n_starts=3),
        "5 score groups": lambda d: fit_em(d, model="grouped", groups=Binning.equal_mass(5), n_starts=3),
        "histogram 10 bins": lambda d: fit_em(d, model="histogram", groups=Binning.equal_mass(10), n_starts=3),
        "histogram 20 bins": lambda d: fit_em(d, model="histogram", groups=Binning.equal_mass(20), n_starts=3),
        "histogram n/100 bins, at most 50 (default)": lambda d: default_issue_fit(d, n_starts=3),
        "histogram 50 bins": lambda d: fit_em(d, model="histogram", groups=Binning.equal_mass(50), n_starts=3),
        "Platt curve (MAP)": lambda d: fit_map(d, model="platt", n_starts=2),
    }
    rows = []
    for label, setting in settings.items():
        for seed in seeds:
            sim = simulate_annotations(n_items, seed=seed, **setting)
            d, y = sim.data, sim.clean_labels
            maj = d.majority_vote()
            target = (maj != y).astype(float)
            k = max(int(target.sum()), 10)
            scores = {}
            for name, make in fits.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fit = make(d)
                scores[name] = by_item(label_issues(d, fit), "p_majority_wrong", d.n_items)
            scores["confident learning (majority)"] = 1 - confident_learning(maj, d.scores).label_quality
            vf = d.vote_fraction()
            scores["majority disagreement"] = np.minimum(vf, 1 - vf)
            for name, s in scores.items():
                (_, prec, _), = precision_recall_at_k(s, target, [k])
                rows.append({"setting": label, "seed": seed, "ranking": name, "k": k, "precision": prec})
    df = pd.DataFrame(rows)
    summary = (df.groupby(["setting", "ranking"], sort=False)["precision"]
               .agg(mean="mean", se=lambda x: x.std(ddof=1) / np.sqrt(len(x))).reset_index())
    return df, summary


# ----------------------------------------------------------------------------- 5. circularity
def circularity(n_items=2000, n_sets=20, seed=0):
    """Bias of accuracy estimates that reuse a model's own scores, over simulated data sets.

    Latent log-odds ``s ~ N(0, 2^2)``, ``Y ~ Bernoulli(sigmoid(s))``; two classifiers see ``s`` through
    independent noise, ``z_A = sigmoid(s + e_A)``, ``z_B = sigmoid(s + e_B)``, ``e ~ N(0, 1)``: each
    knows something the other does not. Three annotators. Accuracy at 0.5 of A and B, estimated by
    (1) the posterior under a fit conditioned on A's score bins (20-bin histogram on ``z_A``),
    (2) hard "corrected labels": the argmax of that posterior, (3) confident-learning style correction:
    majority labels flagged by CL with A's probabilities flipped, (4) the posterior under the
    ``compare_models`` default groups (joint prediction pattern of A and B x bins of their mean score),
    (5) the majority vote.
    """
    rng = np.random.default_rng(seed)
    fpr, tpr = np.array([0.15, 0.2, 0.25]), np.array([0.8, 0.85, 0.75])
    rows = []
    for r in range(n_sets):
        s = rng.normal(0, 2, n_items)
        y = (rng.random(n_items) < 1 / (1 + np.exp(-s))).astype(int)
        z_a = 1 / (1 + np.exp(-(s + rng.normal(0, 1, n_items))))
        z_b = 1 / (1 + np.exp(-(s + rng.normal(0, 1, n_items))))
        labels = (rng.random((n_items, 3)) < np.where(y[:, None] == 1, tpr, fpr)).astype(int)
        data = AnnotationSet.from_wide(labels, z_a)
        yhat = {"A": (z_a >= 0.5).astype(int), "B": (z_b >= 0.5).astype(int)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_a = fit_em(data, model="histogram", groups=threshold_bins(z_a, [0.5], n_items), n_starts=3)
            fit_j = fit_em(data, model="grouped", n_starts=3,
                           groups=comparison_groups(np.stack(list(yhat.values()), 1), [z_a, z_b]))
        p_a = label_issues(data, fit_a).sort_values("item")["p_positive"].to_numpy()
        p_j = label_issues(data, fit_j).sort_values("item")["p_positive"].to_numpy()
        maj = data.majority_vote()
        cl = confident_learning(maj, z_a)
        cl_labels = np.where(cl.is_issue, 1 - maj, maj)
        for name, h in yhat.items():
            truth = np.mean(h == y)
            rows.append({"set": r, "model": name, "truth": truth,
                         "posterior, groups from A's score": np.mean(np.where(h == 1, p_a, 1 - p_a)) - truth,
                         "hard posterior labels (argmax), A's groups": np.mean(h == (p_a > 0.5)) - truth,
                         "CL-corrected labels (A's probabilities)": np.mean(h == cl_labels) - truth,
                         "posterior, compare_models default groups": np.mean(np.where(h == 1, p_j, 1 - p_j)) - truth,
                         "majority vote": np.mean(h == maj) - truth})
    df = pd.DataFrame(rows)
    cols = [c for c in df.columns if c not in ("set", "model", "truth")]
    long = df.melt(id_vars=["set", "model"], value_vars=cols, var_name="estimate", value_name="bias")
    summary = (long.groupby(["estimate", "model"], sort=False)["bias"]
               .agg(mean_bias="mean", se=lambda x: x.std(ddof=1) / np.sqrt(len(x))).reset_index())
    # Difference A - B: what a comparison would conclude, minus the truth.
    wide = df.pivot(index="set", columns="model")
    diff = {c: (wide[c]["A"] - wide[c]["B"]) for c in cols}
    summary_diff = pd.DataFrame({"estimate": cols, "mean_bias_of_A_minus_B": [diff[c].mean() for c in cols],
                                 "se": [diff[c].std(ddof=1) / np.sqrt(n_sets) for c in cols]})
    truth_gap = float((wide["truth"]["A"] - wide["truth"]["B"]).mean())
    return summary, summary_diff, truth_gap


# ----------------------------------------------------------------------------- real data
def load():
    frame = pd.read_csv(DATA)
    data = AnnotationSet.from_wide(frame[ANNOTATORS].to_numpy(), frame["score"].clip(0, 1).to_numpy(),
                                   annotators=ANNOTATORS)
    return frame, data


def by_item(df, column, n):
    """Column of a label_issues / item table re-ordered to data order (items are 0..n-1 here)."""
    out = np.empty(n)
    out[df["item"].to_numpy().astype(np.int64)] = df[column].to_numpy()
    return out


def ranking_section(frame, data, fits, ks):
    y = frame["y_ref"].to_numpy()
    n = data.n_items
    maj = data.majority_vote()
    vf = data.vote_fraction()
    target_maj = (maj != y).astype(float)
    ranks = {}
    for name, fit in fits.items():
        ranks[f"posterior: {name}"] = by_item(label_issues(data, fit), "p_majority_wrong", n)
    cl_maj = confident_learning(maj, data.scores)
    ranks["confident learning (given = majority)"] = 1 - cl_maj.label_quality
    ranks["majority disagreement"] = np.minimum(vf, 1 - vf)
    table_a = rank_table(ranks, target_maj, ks + [int(target_maj.sum())], "majority label wrong")

    # Single annotation (annotator 1): the confident-learning setting, one noisy label per item.
    a1 = data.labels[:, 0]
    target_a1 = (a1 != y).astype(float)
    ranks1 = {}
    for name, fit in fits.items():
        ap = annotation_posteriors(data, fit)
        ap = ap[ap["annotator"] == "ann1"]
        ranks1[f"posterior: {name}"] = by_item(ap, "p_wrong", n)
    cl1 = confident_learning(a1, data.scores)
    ranks1["confident learning (given = ann1)"] = 1 - cl1.label_quality
    others = data.labels[:, 1:]
    ranks1["disagreement with ann2, ann3"] = (others != a1[:, None]).sum(axis=1).astype(float)
    table_b = rank_table(ranks1, target_a1, ks + [int(target_a1.sum())], "annotator-1 label wrong")
    rng = np.random.default_rng(0)
    default = next(k for k in ranks if "(default)" in k)
    paired = {}
    for task, rk, tg in (("majority", ranks, target_maj), ("ann1", ranks1, target_a1)):
        k = int(tg.sum())
        for other in rk:
            if other != default:
                d, se = paired_difference(rk[default], rk[other], tg, k, rng)
                paired[f"{task}: default - {other}"] = {"k": k, "difference": d, "se": se}
    cl_summary = {"paired_precision_at_n_errors": paired,
        "majority": {"n_flagged": cl_maj.n_issues, "n_issues_estimate": cl_maj.n_issues_estimate,
                     "precision_of_flagged": float(target_maj[cl_maj.is_issue].mean()),
                     "recall_of_flagged": float(target_maj[cl_maj.is_issue].sum() / target_maj.sum()),
                     "noise_matrix": cl_maj.noise_matrix.tolist()},
        "ann1": {"n_flagged": cl1.n_issues, "n_issues_estimate": cl1.n_issues_estimate,
                 "precision_of_flagged": float(target_a1[cl1.is_issue].mean()),
                 "recall_of_flagged": float(target_a1[cl1.is_issue].sum() / target_a1.sum()),
                 "noise_matrix": cl1.noise_matrix.tolist()},
    }
    return pd.concat([table_a, table_b], ignore_index=True), ranks, ranks1, cl_summary, target_maj, target_a1


def accuracy_section(frame, data, fits, seed=0):
    y = frame["y_ref"].to_numpy()
    z = data.scores
    truth = float(np.mean((z >= 0.5) == y))
    rows = []
    for name, fit in [("corrected_accuracy default (bins with 0.5 as an edge, EM)", None)] + list(fits.items()):
        name = name.replace("(default)", "(label_issues default)")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = corrected_accuracy(data, fit, threshold=0.5, n_replicates=2000, seed=seed)
        rows.append({"fit": name, "accuracy_vs_y_ref": truth, **res.to_frame().iloc[0].to_dict(),
                     "warned": any("not a function" in str(w.message) for w in caught)})
    return pd.DataFrame(rows)


def comparison_section(frame, data, nuts, seed=0):
    y = frame["y_ref"].to_numpy()
    z = data.scores
    rng = np.random.default_rng(seed)
    logit = np.log(np.clip(z, 1e-12, 1)) - np.log(np.clip(1 - z, 1e-12, 1))
    # B: the same predictions at 0.5, made under-confident (temperature 3): worse calibration, same accuracy.
    z_b = 1 / (1 + np.exp(-logit / 3))
    # C: 4% of items get a uniformly random score: lower accuracy, worse calibration.
    z_c = z.copy()
    hit = rng.random(z.size) < 0.04
    z_c[hit] = rng.random(hit.sum())
    models = {"resnet50": z, "resnet50_T3": z_b, "resnet50_4pct_random": z_c}
    out = {}
    yhat = np.stack([(m >= 0.5).astype(int) for m in models.values()], axis=1)
    default_groups = comparison_groups(yhat, list(models.values()))
    runs = [("EM, default groups", None), ("EM, joint prediction cells only", "joint")]
    if nuts:
        runs.append(("NUTS, default groups", "nuts"))
    for label, kind in runs:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kind == "joint":
                fit = fit_em(data, model="grouped", groups=joint_prediction_groups(yhat), n_starts=5, seed=seed)
            elif kind == "nuts":
                fit = fit_nuts(data, model="grouped", groups=default_groups, n_chains=2, n_warmup=500, n_draws=500,
                               seed=seed, progress_bar=False)
            else:
                fit = None
            cmp = compare_models(data, models, fit, bins=10, n_replicates=1000, seed=seed)
        t = cmp.table.copy()
        t["accuracy_vs_y_ref"] = [float(np.mean((m >= 0.5) == y)) for m in models.values()]
        t["ece_vs_y_ref"] = [ece(m, y, bins=10) for m in models.values()]
        t["fit"] = label
        t["parameter_uncertainty"] = cmp.parameter_uncertainty
        out[label] = t
    return pd.concat(out.values(), ignore_index=True)


# ----------------------------------------------------------------------------- figures
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIGURES.mkdir(parents=True, exist_ok=True)
    return plt


def figures(ranks, ranks1, target_maj, target_a1, acc):
    ranking_figure(ranks, ranks1, target_maj, target_a1)
    accuracy_figure(acc)


def ranking_figure(ranks, ranks1, target_maj, target_a1):
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, rk, target, title in [(axes[0], ranks, target_maj, "majority label wrong (433 of 50,000)"),
                                  (axes[1], ranks1, target_a1, "annotator-1 label wrong (2,174 of 50,000)")]:
        n_err = int(target.sum())
        ks = np.unique(np.geomspace(20, 4 * n_err, 40).astype(int))
        for name, s in rk.items():
            prec = [p for _, p, _ in precision_recall_at_k(s, target, ks)]
            style = "-" if name.startswith("posterior") else "--"
            ax.plot(ks, prec, style, label=name)
        ax.axvline(n_err, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("k (items flagged, top of the ranking)")
        ax.set_ylabel("precision at k against y_ref")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1)
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(FIGURES / "label_errors_precision_at_k.png", dpi=120)
    plt.close(fig)


def accuracy_figure(acc):
    """Corrected accuracy per fit against the accuracy vs y_ref and the naive numbers (from the accuracy table)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    rows = acc.reset_index(drop=True)
    yk = np.arange(len(rows))
    ax.errorbar(rows["accuracy"], yk, xerr=[rows["accuracy"] - rows["lower"], rows["upper"] - rows["accuracy"]],
                fmt="o", label="corrected accuracy (posterior, 90%)")
    ax.errorbar(rows["corrected_label_accuracy"], yk + 0.2,
                xerr=[rows["corrected_label_accuracy"] - rows["corrected_label_lower"],
                      rows["corrected_label_upper"] - rows["corrected_label_accuracy"]],
                fmt="s", label="corrected-label estimate (90%)")
    ax.axvline(rows["accuracy_vs_y_ref"].iloc[0], color="k", ls="--", lw=1, label="accuracy vs y_ref")
    ax.axvline(rows["majority_accuracy"].iloc[0], color="r", ls=":", lw=1, label="accuracy vs majority vote")
    ax.axvline(rows["annotator_accuracy"].iloc[0], color="orange", ls=":", lw=1, label="vs one annotator (mean)")
    ax.set_yticks(yk + 0.1)
    ax.set_yticklabels(rows["fit"], fontsize=7)
    ax.set_xlabel("accuracy of 1[score >= 0.5]")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(FIGURES / "label_errors_corrected_accuracy.png", dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer simulation seeds")
    ap.add_argument("--no-nuts", action="store_true", help="skip the NUTS fits")
    ap.add_argument("--sections", default="model_choice,circularity,real",
                    help="comma-separated subset of: model_choice, circularity, real")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    RESULTS.mkdir(parents=True, exist_ok=True)
    summary_path = RESULTS / "label_errors_cifar10n_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary.update({"data": DATA.name, "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    t0 = time.time()

    if "model_choice" in sections:
        detail, ms = model_choice(quick=args.quick)
        detail.to_csv(RESULTS / "label_errors_model_choice_detail.csv", index=False)
        ms.to_csv(RESULTS / "label_errors_model_choice.csv", index=False)
        print(ms.to_string(index=False), flush=True)
        summary["model_choice_seconds"] = round(time.time() - t0, 1)

    if "circularity" in sections:
        circ, circ_diff, gap = circularity(n_sets=8 if args.quick else 20)
        circ.to_csv(RESULTS / "label_errors_circularity.csv", index=False)
        circ_diff.to_csv(RESULTS / "label_errors_circularity_difference.csv", index=False)
        summary["circularity_true_accuracy_gap_A_minus_B"] = gap
        print(circ.to_string(index=False), "\n", circ_diff.to_string(index=False), flush=True)

    if "real" not in sections:
        summary_path.write_text(json.dumps(summary, indent=2))
        return 0
    if not DATA.exists():
        print(f"{DATA} not found: real-data sections skipped.", file=sys.stderr)
        return 0
    frame, data = load()
    fits = {}
    t = time.time()
    fits["histogram 50 bins, EM (default)"] = default_issue_fit(data)
    fits["histogram 20 bins, EM"] = fit_em(data, model="histogram", groups=Binning.equal_mass(20), n_starts=5)
    fits["5 score groups, EM"] = fit_em(data, model="grouped", groups=Binning.equal_mass(5), n_starts=5)
    fits["Platt curve, MAP"] = fit_map(data, model="platt", n_starts=3)
    fits["marginal (annotators only), EM"] = fit_em(data, model="dawid_skene", n_starts=5)
    if not args.no_nuts:
        fits["histogram 50 bins, NUTS"] = fit_nuts(data, model="histogram", groups=Binning.equal_mass(50), n_chains=2,
                                                   n_warmup=500, n_draws=500, seed=0, progress_bar=False)
    summary["fit_seconds"] = round(time.time() - t, 1)
    summary["channels"] = {name: {"fpr": np.round(f.channel.fpr, 4).tolist(),
                                  "tpr": np.round(f.channel.tpr, 4).tolist()} for name, f in fits.items()}
    y = frame["y_ref"].to_numpy()
    summary["empirical_channel_vs_y_ref"] = {
        "fpr": [float(np.mean(data.labels[y == 0, j])) for j in range(3)],
        "tpr": [float(np.mean(data.labels[y == 1, j])) for j in range(3)]}

    ks = [50, 100, 200, 500, 1000, 2000, 5000]
    table, ranks, ranks1, cl_summary, target_maj, target_a1 = ranking_section(frame, data, fits, ks)
    table.to_csv(RESULTS / "label_errors_cifar10n_ranking.csv", index=False)
    summary["paired_precision_at_n_errors"] = cl_summary.pop("paired_precision_at_n_errors")
    summary["confident_learning"] = cl_summary
    summary["n_majority_errors"] = int(target_maj.sum())
    summary["n_ann1_errors"] = int(target_a1.sum())
    print(table.to_string(index=False), flush=True)

    # Posterior self-report: expected number of wrong majority labels vs the number against y_ref.
    iss = label_issues(data, fits["histogram 50 bins, EM (default)"])
    summary["expected_majority_errors_default"] = iss.attrs["expected_total_errors"]
    top = iss.iloc[:int(target_maj.sum())]
    summary["expected_precision_at_n_errors_default"] = float(top["p_majority_wrong"].mean())

    acc = accuracy_section(frame, data, {k: v for k, v in fits.items() if "marginal" not in k})
    acc.to_csv(RESULTS / "label_errors_cifar10n_accuracy.csv", index=False)
    print(acc[["fit", "accuracy", "lower", "upper", "corrected_label_accuracy", "accuracy_vs_y_ref",
               "majority_accuracy", "annotator_accuracy", "conditioned", "warned"]].to_string(index=False), flush=True)

    cmp = comparison_section(frame, data, nuts=not args.no_nuts)
    cmp.to_csv(RESULTS / "label_errors_cifar10n_compare.csv", index=False)
    print(cmp.to_string(index=False), flush=True)

    figures(ranks, ranks1, target_maj, target_a1, acc)
    summary["total_seconds"] = round(time.time() - t0, 1)
    summary_path.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
