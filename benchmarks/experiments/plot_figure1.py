"""Figure 1 of docs/experiments.md: toy NC-ECE MAE x 100 vs. N, channels supplied vs. estimated (reuse).

Reads benchmarks/results/experiments_toy_figure1.csv, writes docs/figures/experiments_figure1.png.
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def main():
    t = pd.read_csv(ROOT / "benchmarks" / "results" / "experiments_toy_figure1.csv")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for est, label in (("known", "channels supplied"), ("reuse", "channels estimated (EM, 5 groups, reuse)")):
        s = t[t["estimator"] == est].sort_values("n_items")
        ax.errorbar(s["n_items"], s["mae_x100"], yerr=s["mae_se_x100"], marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("N (items)")
    ax.set_ylabel("NC-ECE MAE x 100")
    ax.set_title(f"Calibrated toy condition ({int(t['n_reps'].min())} reps; bars: 1 MC SE)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = ROOT / "docs" / "figures" / "experiments_figure1.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(out)


if __name__ == "__main__":
    main()
