"""A fingerprint of every seeded computation, used to compare runs within and across processes.

``python -m tests.reliability._determinism OUT_DIR`` prints the fingerprint as JSON (floats as exact
``repr`` strings); :func:`fingerprint` is the same computation in-process.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import sys
import warnings
from pathlib import Path

import numpy as np
from noisycal_bayes.data import Binning


def _exact(values) -> list:
    return [repr(float(v)) for v in np.ravel(np.asarray(values, dtype=np.float64))]


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def fingerprint(workdir, *, seed: int = 5) -> dict:
    """Seeded results of the simulator, both EMs, the bootstrap, the posterior NC-ECE and the command line."""
    from noisycal_bayes import nc_ece, simulate_annotations
    from noisycal_bayes.cli import main
    from noisycal_bayes.inference import fit_em
    from noisycal_bayes.propagate import posterior_nc_ece
    from noisycal_bayes.reference import bootstrap_nc_ece
    from noisycal_bayes.reference import fit_em as reference_fit_em

    workdir = Path(workdir)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], curve="overconfident",
                                   missing=0.1, seed=seed)
        data = sim.data
        out["simulate"] = _digest(data.labels, data.scores, sim.clean_labels)
        ref = reference_fit_em(data, groups=Binning.equal_mass(4), n_starts=3, seed=seed)
        out["reference_em"] = _exact(np.concatenate([ref.channel.fpr, ref.channel.tpr, ref.prevalence]))
        out["reference_em_starts"] = _exact(np.nan_to_num(ref.start_logliks))
        inf = fit_em(data, groups=Binning.equal_mass(4), n_starts=3, seed=seed)
        out["inference_em"] = _exact(np.concatenate([inf.channel.fpr, inf.channel.tpr, inf.prevalence]))
        out["nc_ece"] = _exact(nc_ece(data, ref.channel).value)
        boot = bootstrap_nc_ece(data, estimator=lambda d: ref.channel, n_boot=15, seed=seed)
        out["bootstrap"] = _exact(boot.replicates)
        post = posterior_nc_ece(data, inf, seed=seed, n_draws=50)
        out["posterior_nc_ece"] = _exact(post.draws)
        long = data.to_long()
        long[["item", "annotator", "label"]].to_csv(workdir / "ann.csv", index=False)
        long.drop_duplicates("item")[["item", "score"]].to_csv(workdir / "scores.csv", index=False)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = main(["evaluate", workdir / "ann.csv", "--scores", workdir / "scores.csv", "--method", "em",
                         "--groups", "4", "--n-boot", "10", "--seed", str(seed), "--json", workdir / "r.json"])
        out["cli_exit"] = code
        result = json.loads((workdir / "r.json").read_text())
        out["cli"] = [result["nc_ece"][k] for k in ("value", "lower", "upper", "upper_bound")]
        out["cli_channels"] = [[c["fpr"], c["tpr"], c["fpr_lower"], c["tpr_upper"]] for c in result["channels"]]
    return out


if __name__ == "__main__":
    print(json.dumps(fingerprint(sys.argv[1], seed=int(sys.argv[2]) if len(sys.argv) > 2 else 5)))
