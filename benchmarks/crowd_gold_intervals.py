"""How often each worker's 90% fpr / tpr intervals (``fit_em(...).annotators``) hold its rates measured against gold,
on the three gold-labelled crowds in ``crowd_gold/`` of the shared data folder (bluebirds: Welinder et al. 2010; rte,
temp: Snow et al. 2008; sources in that folder's README). Gold is known for every item there, so each worker's
gold-measured rate is its exact error rate on the items it labelled. Writes
``benchmarks/results/crowd_gold_intervals.json`` and prints the table of docs/crowds.md.

    python benchmarks/crowd_gold_intervals.py [--data DIR] [--out JSON]
"""
import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from noisycal_bayes import AnnotationSet, fit_em
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path

REPO = Path(__file__).resolve().parents[1]


def held(name: str, folder: Path) -> dict:
    df = pd.read_csv(folder / f"{name}.csv")
    data = AnnotationSet.from_crowdkit(df.rename(columns={"item": "task"})[["task", "worker", "label"]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # flagged workers are expected on crowds
        fit = fit_em(data, model="dawid_skene", starts="vote")
    table = fit.annotators.set_index("annotator")
    gold = df.groupby("item")["gold"].first()
    df = df.assign(g=df["item"].map(gold))
    rates = pd.DataFrame({"fpr": df[df.g == 0].groupby("worker")["label"].mean(),
                          "tpr": df[df.g == 1].groupby("worker")["label"].mean()}).reindex(table.index)
    out = {"crowd": name, "workers": len(table), "median_labels": float(table["n_labels"].median()),
           "conditional_share": float(np.mean(table.attrs.get("conditional", np.zeros(len(table), bool))))}
    for k in ("fpr", "tpr"):
        known = rates[k].notna()
        inside = (table[f"{k}_lower"] <= rates[k]) & (rates[k] <= table[f"{k}_upper"])
        edge = rates[k].isin([0.0, 1.0])
        out[f"held_{k}"] = float(inside[known].mean())
        out[f"n_{k}"] = int(known.sum())
        out[f"held_{k}_edge"] = float(inside[known & edge].mean()) if (known & edge).any() else None
        out[f"n_{k}_edge"] = int((known & edge).sum())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(shared_data_path("crowd_gold") or ""),
                    help="the crowd_gold folder (default: the shared data folder's)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "crowd_gold_intervals.json"))
    args = ap.parse_args()
    if not args.data:
        raise SystemExit(f"crowd_gold not found: {SHARED_DATA_HINT}, or pass --data.")
    rows = [held(n, Path(args.data)) for n in ("bluebirds", "rte", "temp")]
    Path(args.out).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    print(pd.DataFrame(rows).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
