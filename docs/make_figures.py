"""Make the figures of docs/reliability_diagram.md: naive and noise-corrected reliability diagrams side by side.

Usage::

    python docs/make_figures.py                                  # bundled demo data only
    NOISYCAL_CIFAR10N=/path/to/cifar10n_vehicle.csv python docs/make_figures.py   # and CIFAR-10N
    python docs/make_figures.py --cifar10n /path/to/cifar10n_vehicle.csv

Writes ``docs/figures/reliability_demo.png``, ``docs/figures/reliability_cifar10n.png`` (when the CIFAR-10N
file is given) and ``docs/figures/reliability_numbers.json`` (the ECEs printed in the panel titles and the
page). Each data set: channels by NUTS (2 chains x 1,000 draws after 1,000 warm-up; ``converged`` and the fit's
warnings are recorded in the JSON), the corrected frequencies
and their 90% bands by ``propagate.posterior_reliability`` (ten equal-width bins, IV weights), drawn by
``plotting.reliability_diagram``; the left panel shows what the noisy labels say when taken as truth.

Data. Demo: ``noisycal_bayes.data.load_demo()`` (simulated; the clean labels are known). CIFAR-10N:
``cifar10n_vehicle.csv`` (vehicle vs. animal on the 50,000 CIFAR-10 training images). Labels: CIFAR-10N,
Wei et al., "Learning with Noisy Labels Revisited: A Study Using Real-World Human Annotations", ICLR 2022
(UCSC-REAL/cifar-10-100n, CC BY-NC 4.0). Scores: the cross-validated ResNet-50 probabilities published
with confident learning, Northcutt et al. (cgnorthcutt/confidentlearning-reproduce, MIT). The original
CIFAR-10 label ``y_ref`` serves only as the reference curve, never for fitting.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

if __name__ == "__main__":
    import numpyro

    numpyro.set_host_device_count(2)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIGURES = ROOT / "docs" / "figures"

import numpy as np  # noqa: E402

from noisycal_bayes import ece, nc_ece, smece  # noqa: E402
from noisycal_bayes.data.loaders import load_demo  # noqa: E402
from noisycal_bayes.experiments.cifar10n import ENV_VAR, load_cifar10n  # noqa: E402
from noisycal_bayes.inference import fit_nuts  # noqa: E402
from noisycal_bayes.plotting import reliability_diagram, reliability_table  # noqa: E402
from noisycal_bayes.plotting._mpl import MAJORITY, ORACLE, VOTE_FRACTION, new_figure  # noqa: E402
from noisycal_bayes.propagate import posterior_reliability  # noqa: E402

BINS = 10
LEVEL = 0.9


def side_by_side(data, fit, reference, *, reference_name: str, title: str, seed: int = 0):
    """Figure with the naive diagram (left) and the noise-corrected one (right), and the numbers shown.

    Parameters
    ----------
    data : AnnotationSet with scores
    fit : FitResult (NUTS) of the channels on ``data``
    reference : ndarray of shape (n_items,)
        Labels used only to draw the reference curve (clean labels of a simulation, or a reference label set).
    reference_name : str
        Legend text of the reference curve.
    title : str
    seed : int
        Seed of the Bayesian bootstrap in ``posterior_reliability``.

    Returns
    -------
    fig : matplotlib.figure.Figure
    numbers : dict
        ECE against the majority vote, SMECE against the vote fraction, the reference-label ECE, the
        plug-in NC-ECE with the posterior-mean channels, the number of bins whose band holds the reference
        frequency and the bins whose band misses it, and the majority-vote and reference frequencies of the
        two extreme bins.
    """
    z = data.scores
    rel = posterior_reliability(data, fit, bins=BINS, level=LEVEL, seed=seed)
    edges = np.append(rel["lower"].to_numpy(), rel["upper"].to_numpy()[-1])
    ref = reliability_table(z, reference, edges)
    holds = ((rel["frequency_lower"] <= ref["frequency"]) & (ref["frequency"] <= rel["frequency_upper"])).to_numpy()
    numbers = {
        "n_items": int(data.n_items),
        "nuts_converged": bool(fit.converged),
        "nuts_warnings": list(fit.warnings),
        "majority_vote_ece": float(ece(z, data.majority_vote(ties="positive"), bins=BINS)),
        "vote_fraction_smece": float(smece(z, data.vote_fraction(), bins=BINS)),
        "reference_ece": float(ece(z, reference, bins=BINS)),
        "nc_ece_posterior_mean_channels": float(nc_ece(data, fit.channel, bins=BINS).value),
        "bins_with_items": int((rel["count"] > 0).sum()),
        "bins_band_holds_reference": int(holds.sum()),
        "bins_band_misses_reference": [
            {"bin": int(k), "items": int(rel["count"].iloc[k]), "mean_score": round(float(rel["mean_score"].iloc[k]), 3),
             "reference": round(float(ref["frequency"].iloc[k]), 3),
             "band": [round(float(rel["frequency_lower"].iloc[k]), 3), round(float(rel["frequency_upper"].iloc[k]), 3)]}
            for k in np.flatnonzero(~holds & (rel["count"].to_numpy() > 0))],
        "majority_vote_frequency_extreme_bins": [round(float(v), 4) for v in rel["majority_vote_frequency"].iloc[[0, -1]]],
        "reference_frequency_extreme_bins": [round(float(v), 4) for v in ref["frequency"].iloc[[0, -1]]],
    }
    fig, (left, right) = new_figure(1, 2, figsize=(11, 4.8), sharey=True)
    left.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":", label="perfect calibration")
    maj = reliability_table(z, data.majority_vote(ties="positive"), edges)
    vf = reliability_table(z, data.vote_fraction(), edges)
    left.plot(maj["mean_score"], maj["frequency"], "s--", color=MAJORITY, lw=1.2, ms=4,
              label=f"majority vote (ECE {numbers['majority_vote_ece']:.3f})")
    left.plot(vf["mean_score"], vf["frequency"], "^--", color=VOTE_FRACTION, lw=1.2, ms=4,
              label=f"vote fraction (SMECE {numbers['vote_fraction_smece']:.3f})")
    left.plot(ref["mean_score"], ref["frequency"], "D-", color=ORACLE, lw=1, ms=3, alpha=0.8,
              label=f"{reference_name} (ECE {numbers['reference_ece']:.3f})")
    left.set_xlim(0, 1)
    left.set_xlabel("score (mean per bin)")
    left.set_ylabel("frequency of the positive class")
    left.legend(loc="upper left", fontsize=8, frameon=False)
    left.set_title("Naive: noisy labels taken as truth")
    reliability_diagram(rel, lower=rel["frequency_lower"].to_numpy(), upper=rel["frequency_upper"].to_numpy(),
                        level=LEVEL, data=data, clean_labels=reference, clean_labels_name=reference_name, ax=right,
                        title=f"Noise-corrected (NC-ECE {numbers['nc_ece_posterior_mean_channels']:.3f})")
    fig.suptitle(title)
    return fig, numbers


def _fit(data, *, model, seed=0):
    # 1,000 warm-up steps and draws per chain: with 500, R-hat of fpr[lenient] on the demo data was 1.012 (> 1.01).
    kw = {"groups": 5} if model == "grouped" else {}
    return fit_nuts(data, model=model, n_chains=2, n_warmup=1000, n_draws=1000, seed=seed, progress_bar=False, **kw)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cifar10n", default=os.environ.get(ENV_VAR),
                   help=f"cifar10n_vehicle.csv (default: the environment variable {ENV_VAR}; skipped when absent)")
    a = p.parse_args(argv)
    FIGURES.mkdir(parents=True, exist_ok=True)
    out = {}
    data, truth = load_demo()
    fit = _fit(data, model="grouped")  # three annotators, five equal-mass score groups
    fig, out["demo"] = side_by_side(data, fit, truth["clean_labels"], reference_name="clean labels",
                                    title="Bundled demo data: 4,000 simulated items, 3 annotators")
    fig.savefig(FIGURES / "reliability_demo.png", dpi=110)
    if a.cifar10n:
        data, y_ref = load_cifar10n(a.cifar10n)
        fit = _fit(data, model="dawid_skene")  # the paper's §6.3 model: three annotators, no score groups
        fig, out["cifar10n"] = side_by_side(
            data, fit, y_ref, reference_name="original CIFAR-10 label",
            title="CIFAR-10N vehicle vs. animal: 50,000 images, 3 human annotators")
        fig.savefig(FIGURES / "reliability_cifar10n.png", dpi=110)
    else:
        print(f"CIFAR-10N figure skipped: pass --cifar10n or set {ENV_VAR}")
    (FIGURES / "reliability_numbers.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
