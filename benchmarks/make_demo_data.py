"""Generate the bundled demo data set (run once; the CSV files are committed).

    .venv/bin/python benchmarks/make_demo_data.py

Writes to ``noisycal_bayes/data/bundled/``:

- ``demo_annotations.csv`` — long format ``item, annotator, label`` (missing responses are absent rows);
- ``demo_scores.csv`` — ``item, score`` (6 decimals);
- ``demo_truth.csv`` — ``item, clean_label`` (the latent ``Y_i``; for checking only, never for fitting);
- ``demo_channels.csv`` — ``annotator, fpr, tpr`` (the true channels).

The truth lives in CSV (not JSON) because the package ships ``bundled/*.csv`` only.

Design: 4000 items, scores ``Z ~ Beta(0.7, 0.7)`` from an over-confident model (true calibration curve
``m(z) = sigmoid(0.5 logit z)``, :data:`noisycal_bayes.simulate.CURVES` ``"overconfident"``), three
annotators with distinct channels, each response missing with probability 0.15 (every item keeps at least
one label). The seed is fixed, so re-running reproduces the files byte for byte.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from noisycal_bayes.simulate import simulate_annotations

OUT = Path(__file__).resolve().parents[1] / "noisycal_bayes" / "data" / "bundled"

N_ITEMS = 4000
ANNOTATORS = ("careful", "hasty", "lenient")
FPR = (0.05, 0.20, 0.35)   # lenient says "yes" to a third of the negatives
TPR = (0.90, 0.70, 0.95)   # gaps 0.85, 0.50, 0.60
CURVE = "overconfident"
SCORE_BETA = (0.7, 0.7)
MISSING = 0.15
SEED = 20240611


def main(out: Path = OUT) -> None:
    """Write the four CSV files into ``out`` (default: the package's bundled folder)."""
    out = Path(out)
    sim = simulate_annotations(N_ITEMS, fpr=FPR, tpr=TPR, curve=CURVE, score_beta=SCORE_BETA, missing=MISSING,
                               seed=SEED)
    data = sim.data
    items = np.arange(1, N_ITEMS + 1)          # 1-based item ids, as a user's file would have
    lab = data.labels
    ii, jj = np.nonzero(lab >= 0)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"item": items[ii], "annotator": np.asarray(ANNOTATORS)[jj], "label": lab[ii, jj].astype(int)}) \
        .to_csv(out / "demo_annotations.csv", index=False)
    pd.DataFrame({"item": items, "score": np.round(data.scores, 6)}) \
        .to_csv(out / "demo_scores.csv", index=False, float_format="%.6f")
    pd.DataFrame({"item": items, "clean_label": sim.clean_labels.astype(int)}) \
        .to_csv(out / "demo_truth.csv", index=False)
    pd.DataFrame({"annotator": ANNOTATORS, "fpr": FPR, "tpr": TPR}).to_csv(out / "demo_channels.csv", index=False)
    total = sum(p.stat().st_size for p in out.glob("demo_*.csv"))
    print(f"wrote {out} ({total / 1024:.0f} kB): {N_ITEMS} items, {ii.size} labels, "
          f"{int((lab < 0).sum())} missing responses")


if __name__ == "__main__":
    main()
