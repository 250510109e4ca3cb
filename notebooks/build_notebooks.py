"""Generate the tutorial notebooks (outputs stripped) with nbformat.

Run ``python notebooks/build_notebooks.py`` from the repository root after editing a notebook's cells here;
commit both this script and the ``.ipynb`` files. Every notebook reads ``NOISYCAL_NB_SMALL=1`` in its first
code cell and then runs at small sizes (the test suite, ``tests/test_notebooks.py``, does this).
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent

SETUP = '''\
import os
import warnings
from pathlib import Path

from noisycal_bayes.inference import configure_jax
configure_jax()                  # first, before any JAX computation: one JAX device per core, faster NUTS

import numpy as np
import pandas as pd
%matplotlib inline
# The inline backend draws every figure a cell returns into the notebook (and into the docs site, which executes
# the notebooks); the package's plotting functions return figures and never open a window.

SMALL = os.environ.get("NOISYCAL_NB_SMALL") == "1"   # set by the test suite: tiny sizes, same code
REPO = next(p for p in [Path.cwd(), *Path.cwd().parents] if (p / "pyproject.toml").exists())
'''


# The CIFAR-10N vehicle subsample (or the bundled demo when the file is missing), shared by two notebooks;
# "{ok}" and "{fallback}" take a notebook's extra line for each branch.
LOAD_VEHICLE = '''if CSV.exists():
    raw = pd.read_csv(CSV)
    sub = raw.sample(n=min(N_ITEMS, len(raw)), random_state=0).sort_values("item")
    data = AnnotationSet.from_wide(sub.set_index("item")[["ann1", "ann2", "ann3"]], scores=sub["score"].to_numpy())
    y_ref = sub["y_ref"].to_numpy()
{ok}else:
    print("cifar10n_vehicle.csv is not available here: using the bundled simulated demo data instead.")
    from noisycal_bayes.data.loaders import load_demo
    data, truth = load_demo()
    y_ref = np.asarray(truth["clean_labels"])
{fallback}'''


def md(text: str):
    return new_markdown_cell(text.strip("\n"))


def code(text: str):
    return new_code_cell(text.strip("\n"))


# ------------------------------------------------------------------------------------------------ notebook 1
NB1 = [
    md("""
# 1. Posterior analysis on real noisy labels: CIFAR-10N, vehicle vs. animal

**Question.** A ResNet-50 gives every CIFAR-10 training image a probability of showing a vehicle. Three
crowd workers labelled each image, and they make mistakes. Is the model calibrated, and how sure can we be,
using only the noisy labels?

**Data.** `cifar10n_vehicle.csv` (50,000 items) from the shared data folder:
labels from CIFAR-10N — J. Wei et al., *Learning with Noisy Labels Revisited: A Study Using Real-World Human
Annotations*, ICLR 2022 (UCSC-REAL/cifar-10-100n, licence CC BY-NC 4.0); scores are the cross-validated
ResNet-50 probabilities published with confident learning, C. Northcutt et al.
(cgnorthcutt/confidentlearning-reproduce, MIT licence). The original CIFAR-10 label `y_ref` is kept aside as a
reference and is **never** used for fitting. If the file is absent, the notebook falls back to the bundled
simulated demo data (with known truth).
"""),
    code(SETUP + '''
N_ITEMS = 2000 if SMALL else 20000          # items used (a random subsample of the 50,000)
N_CHAINS, N_WARMUP, N_DRAWS = (2, 500, 500) if SMALL else (4, 1000, 1000)
CSV = (REPO / ".." / "shared" / "data" / "cifar10n_vehicle.csv").resolve()
print("small mode" if SMALL else "full mode", "| data file:", CSV, "found" if CSV.exists() else "NOT found")
'''),
    md("""
## Load the labels and scores

Three annotator columns `ann1..ann3` (0/1), the model's `score`, and the reference `y_ref`.
"""),
    code('''
from noisycal_bayes import AnnotationSet, ece, smece

''' + LOAD_VEHICLE.replace("{ok}", '    source = "CIFAR-10N vehicle vs. animal"\n').replace("{fallback}", '    source = "bundled demo (simulated)"\n') + '''print(source, data)
'''),
    md("""
## Fit the annotators' channels: EM first, then NUTS

Each annotator `j` has a false-positive rate `fpr_j` (paper `a_j`) and a true-positive rate `tpr_j`
(`a_j + delta_j`); the gap `gap_j = tpr_j - fpr_j` (`delta_j`). Score groups (the default `groups=Binning.equal_mass(5)`: five equal-mass groups)
give different prevalences (`pi_g`), which is what identifies the channels. EM gives a point estimate in a
second; NUTS gives the posterior.
"""),
    code('''
from noisycal_bayes.inference import fit_em, fit_nuts

em = fit_em(data)
print(em.channel.to_frame().round(4))
'''),
    code('''
post = fit_nuts(data, n_chains=N_CHAINS, n_warmup=N_WARMUP, n_draws=N_DRAWS, seed=0, progress_bar=False)
post.summary(prob=0.9).round(4).head(9)
'''),
    md("""
**Watch out.** R-hat needs at least two chains. Check `R-hat < 1.01`, bulk/tail ESS in the hundreds and
no divergences; `fit_nuts` raises a `ConvergenceWarning` otherwise. The ArviZ object is one call away.
"""),
    code('''
idata = post.to_arviz()    # InferenceData with ArviZ 0.23, xarray.DataTree with ArviZ >= 1
print(type(idata).__name__, "| divergences:", post.n_divergent, "| converged:", post.converged)
'''),
    code('''
import arviz as az

plot_trace = getattr(az, "plot_trace", None) or getattr(az, "plot_trace_dist")   # ArviZ 0.23 / 1.x name
plot_trace(idata, var_names=["gap"]);
'''),
    md("""
## Channel forest plot
"""),
    code('''
from noisycal_bayes.plotting import channel_forest

q = [0.05, 0.95]
intervals = {name: tuple(np.quantile(np.asarray(post.draws[name]).reshape(-1, data.n_annotators), q, axis=0))
             for name in ("fpr", "tpr", "gap")}
channel_forest(post.channel, intervals=intervals, level=0.9, title=f"Channels, {source}")
'''),
    md("""
## NC-ECE with its interval, beside the naive ECEs and the reference-label ECE

`posterior_nc_ece` propagates the channel posterior (and, by default, a Bayesian bootstrap of the items)
into the noise-corrected ECE. Its interval targets the **population binned ECE** on the fixed bins (see the
user guide, *Which target each interval estimates*). The naive numbers use the noisy labels as if they
were true; `y_ref` is the original CIFAR-10 label, an independent (not perfect) reference.
"""),
    code('''
from noisycal_bayes.propagate import posterior_nc_ece
from noisycal_bayes.reference import naive_calibration

res = posterior_nc_ece(data, post, bins=10, level=0.9)
print(res.summary())
naive = naive_calibration(data, bins=10).to_frame()
rows = [("NC-ECE (posterior, bias-corrected)", res.debiased, *res.reported_interval),
        ("ECE against y_ref (reference label)", ece(data.scores, y_ref, bins=10), np.nan, np.nan)]
rows += [(f"naive {m}: {lab}", v, np.nan, np.nan) for m, lab, v in naive[["metric", "labels", "value"]].itertuples(index=False)]
pd.DataFrame(rows, columns=["quantity", "value", "lower", "upper"]).round(4)
'''),
    md("""
**Answer.** Against any single annotator, or the vote fraction, the model looks about three times worse
calibrated than against the reference label; the noise-corrected ECE lands near the ECE against the reference label, with an
interval that says how far to trust it. (The reference label is itself not perfect, so it is a sanity
check, not the truth.)
"""),
    code('''
from noisycal_bayes.plotting import nc_ece_posterior

nc_ece_posterior(res.debiased_draws, value=res.debiased, interval=res.reported_interval, level=res.level,
                 truth=ece(data.scores, y_ref, bins=10), label="posterior (bias-corrected)",
                 title="NC-ECE; line: ECE against y_ref")
'''),
    md("""
## Corrected reliability diagram

The posterior band per bin, with the naive majority-vote and vote-fraction curves and the reference curve.
"""),
    code('''
from noisycal_bayes.plotting import reliability_diagram
from noisycal_bayes.propagate import posterior_reliability

rel = posterior_reliability(data, post, bins=10, level=0.9)
reliability_diagram(rel, lower=rel["frequency_lower"].to_numpy(), upper=rel["frequency_upper"].to_numpy(), level=0.9,
                    data=data, clean_labels=y_ref, title="Corrected reliability (oracle curve: y_ref)")
'''),
    md("""
## Naive vs. corrected recalibration

Temperature scaling fitted to the corrected labels (the channels from the posterior) against the same map
fitted to the majority vote. Fit on one half, evaluate against `y_ref` on the other half. Read the table
rather than expect a direction: this model is already well calibrated, so any map changes little, and in
small mode the half-sample ECEs are noisy.
"""),
    code('''
from noisycal_bayes.recalibration import TemperatureScaling

rng = np.random.default_rng(0)
half = rng.permutation(data.n_items) < data.n_items // 2
fit_part, test_part = data.subset(np.flatnonzero(half)), np.flatnonzero(~half)
corrected = TemperatureScaling().fit(fit_part.scores, fit_part, channel=post.channel)
naive_ts = TemperatureScaling().fit(fit_part.scores, fit_part.majority_vote(ties="positive"))
s_test, y_test = data.scores[test_part], y_ref[test_part]
pd.DataFrame({
    "map": ["none", "naive (majority vote)", "noise-corrected"],
    "temperature": [1.0, naive_ts.temperature_, corrected.temperature_],
    "ECE vs y_ref (held-out half)": [ece(s_test, y_test, bins=10), ece(naive_ts.predict(s_test), y_test, bins=10),
                                      ece(corrected.predict(s_test), y_test, bins=10)],
}).round(4)
'''),
    md("""
**What to watch out for.**
- The method assumes each worker's errors depend on the true class only, not on the image (class-conditional,
  score-invariant noise) and that workers err independently given the class. Hard images break both a little.
- CIFAR-10N worker ids refer to batches, not single labels: the three slots are treated as exchangeable annotators.
- Small mode uses a 2,000-item subsample and short chains; numbers move at full size.
"""),
]

# ------------------------------------------------------------------------------------------------ notebook 2
NB2 = [
    md("""
# 2. How much can we trust NC-ECE when annotators are barely better than chance?

**Question.** Every corrected label is divided by the annotator's gap `gap_j = tpr_j - fpr_j` (paper
`delta_j`). When the gaps are small, the correction amplifies noise. How small is too small, and how does the
package tell you? Data: simulated, so the truth is known.
"""),
    code(SETUP + '''
N_ITEMS = 1500 if SMALL else 5000
N_REPS = 2 if SMALL else 20
N_DRAWS = 100 if SMALL else 400
'''),
    md("""
## Two simulated data sets: healthy gaps and small gaps
"""),
    code('''
from noisycal_bayes import ece, nc_ece
from noisycal_bayes.simulate import simulate_annotations

good = simulate_annotations(N_ITEMS, fpr=[0.10, 0.15, 0.10], tpr=[0.90, 0.85, 0.85], seed=1)
weak = simulate_annotations(N_ITEMS, fpr=[0.40, 0.42, 0.45], tpr=[0.55, 0.50, 0.53], seed=1)
for name, sim in [("healthy", good), ("small gaps", weak)]:
    print(f"{name:10s} gaps {np.round(sim.channel.gap, 2)}  oracle ECE {ece(sim.data.scores, sim.clean_labels, bins=10):.3f}  "
          f"NC-ECE with the true channels {nc_ece(sim.data, sim.channel, bins=10).value:.3f}")
'''),
    md("""
Even with the **true** channels, NC-ECE on the small-gap data lands far above the oracle: each bin's mean
corrected residual is so noisy that its absolute value is biased upwards. Nothing is wrong with the
channels; the data just cannot resolve the calibration error.

## The gap diagnostics

`gap_diagnostics` reports, per annotator, the gap and the probability that it is below `min_gap`, and per
bin the effective number of items after the correction; it raises a `SmallGapWarning` when the results
should not be trusted. Here we pass the true channels (no uncertainty, so `P(gap < min_gap)` is 0 or 1);
pass a `fit_nuts` result instead and that probability comes from the posterior.
"""),
    code('''
from noisycal_bayes.diagnostics.gaps import gap_diagnostics
from noisycal_bayes.warnings import SmallGapWarning

for name, sim in [("healthy", good), ("small gaps", weak)]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SmallGapWarning)
        diag = gap_diagnostics(sim.data, sim.channel, n_draws=N_DRAWS)
    print(f"--- {name}: alarming={diag.alarming}, SmallGapWarnings={sum(issubclass(w.category, SmallGapWarning) for w in caught)}")
    for m in diag.messages:
        print("   ", m)
    display(diag.annotators.round(3))
'''),
    md("""
## Sensitivity: scale the gaps and watch the interval

`mode="perturb"` keeps each `fpr` and scales each gap by a factor, treating the perturbed channels as known.
The interval widens as `1/gap`, and the point estimate moves: a wrong gap biases NC-ECE.
"""),
    code('''
from noisycal_bayes.diagnostics.gaps import gap_sensitivity
from noisycal_bayes.plotting import gap_sensitivity as plot_gap_sensitivity

with warnings.catch_warnings():
    warnings.simplefilter("ignore", SmallGapWarning)   # shrinking the gaps on purpose
    sens = gap_sensitivity(good.data, good.channel, mode="perturb", factors=(0.25, 0.5, 1.0, 1.5), n_draws=N_DRAWS)
display(sens.table.round(4))
plot_gap_sensitivity(sens, title="Healthy data, gaps scaled")
'''),
    md("""
`mode="simulate"` repeats whole simulations at several true gaps and compares NC-ECE with the EM-estimated
channels to the sample oracle ECE.
"""),
    code('''
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    sim_sens = gap_sensitivity(mode="simulate", gaps=(0.2, 0.5, 0.8), n_items=N_ITEMS, n_reps=N_REPS,
                               n_draws=N_DRAWS, seed=0)
display(sim_sens.table.round(4))
plot_gap_sensitivity(sim_sens, title="Simulated, symmetric annotators")
'''),
    md("""
**Answer.** With gaps around 0.7-0.8 NC-ECE tracks the oracle closely. Below about 0.2 the interval is
wide and estimated channels are unstable: the diagnostics flag it, and the right reading is "we cannot
tell", not the point estimate.

**What to watch out for.** Small gaps also make the channels themselves hard to identify (the score groups
must differ enough in prevalence); an annotator with `tpr < fpr` is a flipped annotator, which the package
refuses rather than silently flipping.
"""),
]

# ------------------------------------------------------------------------------------------------ notebook 3
NB3 = [
    md("""
# 3. Bayesian posterior vs. the paper's closed-form and EM estimators

**Question.** The paper (Hanada & Futami, §4) gives closed forms for the channels: two annotators and two
score groups, or three annotators from moments; plus EM and a constrained GMM. How do they compare with the
NumPyro posterior on the same data with known truth?
"""),
    code(SETUP + '''
N_ITEMS = 2000 if SMALL else 10000
N_CHAINS, N_WARMUP, N_DRAWS = (2, 500, 500) if SMALL else (4, 1000, 1000)
'''),
    code('''
from noisycal_bayes.simulate import simulate_annotations

sim = simulate_annotations(N_ITEMS, fpr=[0.10, 0.20, 0.05], tpr=[0.85, 0.90, 0.75], seed=3)
data, truth = sim.data, sim.channel
truth.to_frame()
'''),
    md("""
## The frequentist reference layer
"""),
    code('''
from noisycal_bayes import reference
from noisycal_bayes.data import Binning

with warnings.catch_warnings():
    warnings.simplefilter("ignore")          # warnings are stated in each estimate's `reason`
    estimates = {
        "closed form, 2 groups (ann 0 & 1)": reference.closed_form_two_groups(data, Binning.equal_mass(2), annotators=(0, 1)),
        "moments, 3 annotators": reference.moments_three(data),
        "EM, 5 groups": reference.fit_em(data),
        "GMM, 5 groups": reference.fit_gmm(data, Binning.equal_mass(5)),
    }
for name, est in estimates.items():
    print(f"{name:36s} identified={est.identified} {est.reason}")
'''),
    md("""
## The Bayesian posterior (same grouping as EM)
"""),
    code('''
from noisycal_bayes.inference import fit_nuts

post = fit_nuts(data, n_chains=N_CHAINS, n_warmup=N_WARMUP, n_draws=N_DRAWS, seed=0, progress_bar=False)
draws = {k: np.asarray(post.draws[k]).reshape(-1, data.n_annotators) for k in ("fpr", "tpr")}
'''),
    md("""
## Side by side
"""),
    code('''
rows = []
ids = [str(a) for a in data.annotator_ids]
for j, a in enumerate(ids):
    for param in ("fpr", "tpr"):
        row = {"annotator": a, "parameter": param, "truth": getattr(truth, param)[j]}
        for name, est in estimates.items():
            ch = est.channel
            if ch is None:
                row[name] = np.nan
                continue
            k = [str(x) for x in ch.annotator_ids].index(a) if a in [str(x) for x in ch.annotator_ids] else None
            row[name] = np.nan if k is None else getattr(ch, param)[k]
        lo, hi = np.quantile(draws[param][:, j], [0.05, 0.95])
        row["posterior mean"] = draws[param][:, j].mean()
        row["90% interval"] = f"[{lo:.3f}, {hi:.3f}]"
        rows.append(row)
table = pd.DataFrame(rows)
table.round(3)
'''),
    code('''
from noisycal_bayes.plotting import channel_forest

q = [0.05, 0.95]
intervals = {name: tuple(np.quantile(np.asarray(post.draws[name]).reshape(-1, data.n_annotators), q, axis=0))
             for name in ("fpr", "tpr", "gap")}
channel_forest(post.channel, intervals=intervals, level=0.9, truth=truth, title="Posterior (crosses: truth)")
'''),
    md("""
## What the calibration error looks like with each

NC-ECE with each estimate's channels (plug-in), the reference bootstrap interval for EM, and the
posterior interval, against the sample oracle ECE computed from the simulated clean labels.
"""),
    code('''
from noisycal_bayes import ece, nc_ece
from noisycal_bayes.propagate import posterior_nc_ece

oracle = ece(data.scores, sim.clean_labels, bins=10)
rows = [("oracle (clean labels)", oracle)]
rows += [(name, nc_ece(data, est.channel, bins=10).value) for name, est in estimates.items()
         if est.channel is not None and est.channel.n_annotators == data.n_annotators]   # the 2-annotator closed form cannot
res = posterior_nc_ece(data, post, bins=10)
rows.append(("posterior (bias-corrected)", res.debiased))
print(res.summary())
pd.DataFrame(rows, columns=["channels from", "NC-ECE"]).round(4)
'''),
    md("""
**Answer.** With enough items all identified estimators agree with the truth within their uncertainty; the
closed forms use less of the data (two annotators, or only the moments) and move more from sample to sample,
EM and GMM use the score groups, and the posterior adds intervals (and the channel uncertainty goes
into the NC-ECE interval). The plug-in NC-ECE with point channels sits above the oracle when the model is
nearly calibrated: the absolute value of a noisy bin mean is biased upwards. The posterior estimate is
bias-corrected (`interval="debiased"`, see docs/coverage.md), and its interval names its target.

**What to watch out for.** The two-group closed form needs the two groups to differ in prevalence and
returns `identified=False` (with a reason) when they do not; the three-annotator moments need all three
annotators on the same items. The posterior mean is not the EM estimate: with few items the prior matters.
"""),
]

# ------------------------------------------------------------------------------------------------ notebook 4
NB4 = [
    md("""
# 4. Does the channel model fit? CIFAR-10N, vehicle vs. animal

**Question.** Every NC-ECE rests on two assumptions: each annotator's errors depend on the true class only
(not on the item or its score), and annotators err independently given the class. Do the CIFAR-10N labels
satisfy them, where do they fail, and what does NC-ECE become under models that relax them?

**Data.** `cifar10n_vehicle.csv` from the shared data folder: labels from CIFAR-10N (J. Wei et al., ICLR 2022,
UCSC-REAL/cifar-10-100n, CC BY-NC 4.0); cross-validated ResNet-50 scores published with confident learning
(C. Northcutt et al., cgnorthcutt/confidentlearning-reproduce, MIT licence). The original CIFAR-10 label
`y_ref` is used **only** to compute a reference ECE at the end, never for fitting. Without the file the
notebook uses the bundled simulated demo data. Background: docs/model_checks.md.
"""),
    code(SETUP + '''
N_ITEMS = 3000 if SMALL else 50000          # items used (a random subsample in small mode)
N_REPLICATES = 39 if SMALL else 199         # bootstrap replicates of the checks
COMPARE = "map" if SMALL else "nuts"        # how the three channel models are fitted
# The shared data folder sits beside the main checkout (../shared) or beside the worktrees folder (../../shared).
CSV = next((p.resolve() for p in (REPO / ".." / "shared" / "data" / "cifar10n_vehicle.csv",
                                  REPO / ".." / ".." / "shared" / "data" / "cifar10n_vehicle.csv") if p.exists()),
           (REPO / ".." / "shared" / "data" / "cifar10n_vehicle.csv").resolve())
warnings.simplefilter("ignore", FutureWarning)
print("small mode" if SMALL else "full mode", "| data file:", CSV, "found" if CSV.exists() else "NOT found")
'''),
    code('''
from noisycal_bayes import AnnotationSet, Binning, ece, fit_em

''' + LOAD_VEHICLE.replace("{ok}", "").replace("{fallback}", "") + '''GROUPS = Binning.equal_mass(10)
fit = fit_em(data, groups=GROUPS, seed=0)
print(data)
print(fit.channel.to_frame().round(4))
'''),
    md("""
## 1. The checks

`model_checks` compares the observed (score group x response pattern) counts, the agreement of every pair
of annotators and two targeted statistics with replicates drawn from the fitted model and refitted
(parametric bootstrap). `score_dependent_noise` looks for a trend over the score groups in each annotator's
positive-response residuals; `annotator_dependence` for agreement beyond what independent errors allow.
"""),
    code('''
from noisycal_bayes.diagnostics import model_checks

checks = model_checks(data, fit, n_replicates=N_REPLICATES, seed=0)
checks.table
'''),
    md("""
## 2. Where the misfit is

Standardised residuals per cell: red cells occur more often than the model allows. On the full data the
mixed patterns (`011`, `101`, ...) in the groups near the decision boundary stand out: hard images are hard
for every annotator.
"""),
    code('''
checks.plot()
'''),
    code('''
agr = checks.agreement
agr[(agr.kind == "pair") & (agr.group >= 0)].pivot(index="group", columns=["annotator", "other"], values="z").round(1)
'''),
    md("""
## 3. NC-ECE under richer channel models

Three NumPyro models on the same counts: the paper's shared channels, channels per score group partially
pooled toward a shared channel, and a latent item effect shared by the annotators (Qu, Tan and Kutner 1996).
With NUTS (full mode) they are compared by PSIS-LOO: `elpd_diff > 0` means the data prefer the model to the
shared one. `nc_ece_shift` is how far NC-ECE moves.
"""),
    code('''
from noisycal_bayes.diagnostics.alternatives import compare_noise_models

cmp = compare_noise_models(data, groups=GROUPS, method=COMPARE, n_chains=2, n_warmup=400, n_draws=400)
cmp.table.round(4)
'''),
    md("""
## 4. How much do the gaps matter, within what the data allow?

The profile likelihood re-fits the other parameters at each scale of the gaps; the shaded factors are those
the data allow (95%), and the horizontal band their NC-ECE range. The dashed curve holds `fpr` fixed, a
direction the data rule out.
"""),
    code('''
from noisycal_bayes.diagnostics import gap_profile
from noisycal_bayes.plotting import gap_sensitivity

prof = gap_profile(data, fit, factors=(0.8, 0.9, 0.95, 1.0, 1.02, 1.05))
print("allowed factors", np.round(prof.factor_range, 4), "| NC-ECE range", np.round(prof.nc_ece_range, 4))
gap_sensitivity(prof)
'''),
    md("""
## 5. Against the reference labels (evaluation only)

The ECE against `y_ref` is what NC-ECE estimates if the reference labels were the truth (they are themselves
slightly noisy).
"""),
    code('''
summary = cmp.table[["model", "nc_ece", "nc_ece_lower", "nc_ece_upper"]].copy()
summary.loc[len(summary)] = ["reference labels (ECE)", ece(data.scores, y_ref, bins=10), np.nan, np.nan]
summary.round(4)
'''),
    md("""
**Answer.** On the full CIFAR-10N data (50,000 items, full mode) the shared-channel model is rejected: the
cell counts, the agreement within score groups and the score trend all warn, and the excess-agreement check
warns at the edge of significance; the misfit sits near the decision boundary. PSIS-LOO prefers channels
that vary with the score by about seven standard errors (`elpd_diff` +110, se 16), and under them NC-ECE
moves from 0.014 to 0.016, next to the reference-label ECE of 0.016; the random-effect (correlated) model
changes nothing. The gap scale is pinned to within a fraction of a percent, so small-gap fragility is not
the worry here. Report NC-ECE with the spread across the models beside it. (Small mode uses 3,000 items and
MAP fits, so its numbers differ.)

**What to watch out for.** A pass is not proof: with three annotators and one score group nothing is
testable, and correlated errors that do not vary with the score are partly absorbed into the channels
(docs/model_checks.md, "What three annotators can and cannot identify").
"""),
]


# ------------------------------------------------------------------------------------------------ notebook 5
NB5 = [
    md("""
# 5. Real crowds: every annotator kept

**Question.** Real crowds contain workers who answer at random (spammers, gap `tpr - fpr` ≈ 0) and workers
who answer the opposite class (adversaries, gap < 0). Does `fit_em` estimate every worker's channel
correctly when we do not throw anyone out, does it find the bad workers, and do its clean labels beat
majority vote and crowd-kit's Dawid–Skene?

**Data.** Three crowdsourcing sets with gold labels from the shared data folder (`crowd_gold/`, long format
`item, worker, label, gold`): `bluebirds` (108 images, 39 workers, 4,212 labels; P. Welinder et al., *The
Multidimensional Wisdom of Crowds*, NIPS 2010, repository welinder/cubam, BSD licence), `rte` (800 sentence
pairs, 164 workers, 8,000 labels; recognising textual entailment) and `temp` (462 event pairs, 76 workers,
4,620 labels; temporal ordering, labels 1/2 mapped to 0/1), both from R. Snow et al., *Cheap and Fast — But is
it Good? Evaluating Non-Expert Annotations for Natural Language Tasks*, EMNLP 2008. The `gold` column is kept
aside for evaluation and is **not** given to the fits, except in the last section, which shows what 10% of
it adds. If the folder is absent, the notebook runs on simulated crowds (with known truth as "gold").
"""),
    code(SETUP + '''
import matplotlib.pyplot as plt

SETS = ("bluebirds", "rte", "temp")
NUTS_SET = "rte"                                  # the pooled NUTS fit runs on this set
NUTS_ITEMS = 150 if SMALL else None               # small mode: the first 150 items only
N_CHAINS, N_WARMUP, N_DRAWS = (2, 150, 150) if SMALL else (4, 500, 750)
GOLD_SHARE = 0.10                                 # last section: share of items whose gold label the fit sees

# The shared data folder sits beside the main checkout (../shared) or beside the worktrees folder (../../shared).
DATA_DIR = next((p.resolve() for p in (REPO / ".." / "shared" / "data" / "crowd_gold",
                                       REPO / ".." / ".." / "shared" / "data" / "crowd_gold") if p.exists()), None)
print("small mode" if SMALL else "full mode", "| crowd_gold:", DATA_DIR or "NOT found (simulated crowds instead)")
'''),
    md("""
## Load: the labels for the fit, the gold labels aside

`AnnotationSet.from_crowdkit` reads crowd-kit's frame (`task, worker, label`); it would also pick up a
`gold` column as known clean labels, so `gold=None` keeps them out of the fit. The gold labels go into a
separate array aligned with `data.item_ids`.
"""),
    code('''
from noisycal_bayes import AnnotationSet


def load(name):
    """(long frame item, worker, label, gold; AnnotationSet without gold; gold aligned with data.item_ids)."""
    if DATA_DIR is not None:
        df = pd.read_csv(DATA_DIR / f"{name}.csv")
    else:  # no shared data here: a simulated crowd with spammers and adversaries, its clean labels as gold
        from noisycal_bayes.simulate import simulate_crowd
        sim = simulate_crowd(400, 60, labels_per_item=8, activity="uniform", spammers=0.1, adversaries=0.05,
                             seed=SETS.index(name))
        df = sim.responses.rename(columns={"annotator": "worker"})
        df["gold"] = np.asarray(sim.clean_labels)[df["item"].to_numpy()]
    data = AnnotationSet.from_crowdkit(df.rename(columns={"item": "task"}), gold=None)
    gold = df.groupby("item")["gold"].first().reindex(data.item_ids).to_numpy().astype(int)
    return df, data, gold


sets = {name: load(name) for name in SETS}
pd.DataFrame({name: data.summary() for name, (df, data, gold) in sets.items()}).T[
    ["items", "annotators", "responses", "labels_per_item_median", "labels_per_annotator_min",
     "labels_per_annotator_median", "labels_per_annotator_max", "gold_items"]]
'''),
    md("""
## Fit every annotator's channel with EM (crowd orientation)

`fit_em(data, model="dawid_skene")` with its default `orientation="auto"`: on these crowds no start keeps
every gap above `min_gap`, so it fits the **crowd** orientation (the labels' pooled gap is positive) and keeps
every worker, spammers and adversaries included, each with a 90% interval and a flag. `starts="vote"` starts
one EM from the vote fractions (crowd-kit's start); the flag warnings are expected here and recorded in
`fit.warnings`.
"""),
    code('''
import time

from noisycal_bayes import fit_em

fits, seconds = {}, {}
for name, (df, data, gold) in sets.items():
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # SmallGapWarning naming the flagged workers: shown below
        fits[name] = fit_em(data, model="dawid_skene", starts="vote")
    seconds[name] = time.perf_counter() - t
    fit = fits[name]
    print(f"{name:9s} path={fit.details['path']}, orientation={fit.details['orientation']}, "
          f"{fit.n_iter} iterations, converged={fit.converged}, {seconds[name]:.1f} s (first call compiles)")
    print("   flags:", fit.annotators["flag"].value_counts().to_dict())
'''),
    md("""
## Fitted channels beside the channels measured against gold

With gold labels, each worker's channel can be counted directly: `fpr_gold` = share of 1s among the worker's
labels on gold-negative items (`n_neg` of them), `tpr_gold` = share of 1s on gold-positive items (`n_pos`).
This is a comparison, not a coverage test: the gold count is computed from the same labels as the fit, with
its own sampling error for workers with few labels, and gold is not always the clean label of the model. The
table shows how often the gold count lies inside the fit's 90% interval and the label-weighted distance
between the two.
"""),
    code('''
def gold_channels(df):
    """Per worker: n_neg, fpr_gold, n_pos, tpr_gold, gap_gold, counted against the gold labels."""
    g = df.assign(pos=df["gold"] == 1).groupby(["worker", "pos"])["label"].agg(["size", "mean"]).unstack("pos")
    out = pd.DataFrame({"n_neg": g[("size", False)], "fpr_gold": g[("mean", False)],
                        "n_pos": g[("size", True)], "tpr_gold": g[("mean", True)]})
    out[["n_neg", "n_pos"]] = out[["n_neg", "n_pos"]].fillna(0).astype(int)
    out["gap_gold"] = out["tpr_gold"] - out["fpr_gold"]
    return out


tables = {}
for name, (df, data, gold) in sets.items():
    tab = fits[name].annotators.set_index("annotator").join(gold_channels(df))
    tables[name] = tab
rows = []
for name, tab in tables.items():
    row = {"data": name, "workers": len(tab)}
    for r in ("fpr", "tpr"):
        ok = tab[f"{r}_gold"].notna()
        inside = (tab[f"{r}_lower"] <= tab[f"{r}_gold"]) & (tab[f"{r}_gold"] <= tab[f"{r}_upper"])
        # An equal-tailed Jeffreys interval never reaches 0 or 1, so a worker with no 1s (or no 0s) on a class
        # is "outside" even when fit and gold agree exactly; Brown, Cai & DasGupta (2001) extend the interval
        # to 0 (1) in that case. Shown separately, to tell this boundary effect from real disagreement.
        lo = tab[f"{r}_lower"].where(tab[r] > 1e-6, 0.0)
        hi = tab[f"{r}_upper"].where(tab[r] < 1 - 1e-6, 1.0)
        inside_bcd = (lo <= tab[f"{r}_gold"]) & (tab[f"{r}_gold"] <= hi)
        w = tab.loc[ok, "n_labels"]
        row[f"{r}: gold inside 90% interval"] = round(float(inside[ok].mean()), 3)
        row[f"{r}: same, interval to 0/1 at the boundary"] = round(float(inside_bcd[ok].mean()), 3)
        # label-weighted mean absolute difference: the workers who label most dominate the clean labels
        row[f"{r}: |fit - gold| (label-weighted)"] = round(float(np.average((tab[r] - tab[f"{r}_gold"])[ok].abs(), weights=w)), 4)
    rows.append(row)
pd.DataFrame(rows).set_index("data")
'''),
    code('''
fig, axes = plt.subplots(2, len(SETS), figsize=(4.2 * len(SETS), 8), sharex=True, sharey=True)
colors = {"ok": "tab:blue", "uninformative": "tab:orange", "adversarial": "tab:red"}
for col, (name, tab) in enumerate(tables.items()):
    for row, r in enumerate(("fpr", "tpr")):
        ax = axes[row, col]
        for flag, sub in tab.groupby("flag"):
            # clip: a rate estimated at exactly 0 or 1 lies just outside its Jeffreys interval
            yerr = np.clip([sub[r] - sub[f"{r}_lower"], sub[f"{r}_upper"] - sub[r]], 0, None)
            ax.errorbar(sub[f"{r}_gold"], sub[r], yerr=yerr, fmt="none", alpha=0.4, elinewidth=0.6, color=colors[flag])
            ax.scatter(sub[f"{r}_gold"], sub[r], s=8 + 60 * np.sqrt(sub["n_labels"] / tab["n_labels"].max()),
                       alpha=0.7, color=colors[flag], label=f"{flag} ({len(sub)})")   # area grows with labels
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8)
        ax.set_title(f"{name}: {r}")
        ax.set_xlabel(f"{r} counted against gold")
        ax.set_ylabel(f"{r} fitted by EM (90% interval)")
        if row == 0:
            ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
fig
'''),
    md("""
## The flagged workers, and what gold says about them

`"uninformative"`: the 90% interval of the gap contains 0 (a spammer, or too few labels to tell); such a
worker gets weight 0 downstream (`fit.usable_annotators()`). `"adversarial"`: gap < 0 with the interval
excluding 0; its labels stay usable with their sign, because the corrected label `(A - fpr) / (tpr - fpr)` is
unbiased for any gap ≠ 0. The last columns are the same worker's channel counted against gold.
"""),
    code('''
cols = ["flag", "n_labels", "fpr", "tpr", "gap", "gap_lower", "gap_upper", "n_neg", "n_pos", "gap_gold"]
flagged = pd.concat({name: tab.loc[tab["flag"] != "ok", cols] for name, tab in tables.items()}, names=["data"])
summary = flagged.assign(gold_gap_near_0=flagged["gap_gold"].abs() < 0.2, gold_gap_negative=flagged["gap_gold"] < 0)
print(summary.groupby(["data", "flag"])[["gold_gap_near_0", "gold_gap_negative"]].agg(["sum", "size"]).to_string())
for name, fit in fits.items():
    print(f"{name}: usable downstream {int(fit.usable_annotators().sum())} of {len(fit.usable_annotators())} workers")
flagged.round(3).sort_values(["data", "flag", "n_labels"], ascending=[True, True, False])
'''),
    md("""
## Clean labels against gold: ours, majority vote, crowd-kit

Ours: the posterior mode `P(Y_i = 1 | labels) > 0.5` of the EM fit. Majority vote: ties go to the positive
class. crowd-kit's `DawidSkene` is **not** a dependency of this package: when it is installed the notebook
runs it here, converged (`n_iter=1000, tol=1e-10`; its defaults stop after 5–6 iterations); otherwise it reads
crowd-kit's accuracy and times from `benchmarks/results/bench_crowds.json` (`benchmarks/bench_crowds.py`, section
`gold`: same data, same gold).
"""),
    code('''
import json

try:
    from crowdkit.aggregation import DawidSkene
except ImportError:
    DawidSkene = None
bench = json.loads((REPO / "benchmarks" / "results" / "bench_crowds.json").read_text())
bench_rows = {(r["data"], r["stage"]): r for r in bench["rows"] if r["section"] == "gold" and "data" in r}
print("crowd-kit:", "run here" if DawidSkene else
      f"not installed: numbers read from benchmarks/results/bench_crowds.json (run {bench['machine']['started_utc']}, "
      f"crowd-kit {bench['machine'].get('crowd_kit')})")

rows = []
for name, (df, data, gold) in sets.items():
    ours = (fits[name].clean_label_probability() > 0.5).astype(int)
    row = {"data": name, "majority vote": np.mean(data.majority_vote() == gold), "fit_em": np.mean(ours == gold),
           "fit_em s": seconds[name]}
    if DawidSkene is not None:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # pandas deprecation warnings from crowd-kit
            ck = DawidSkene(n_iter=1000, tol=1e-10).fit_predict(df.rename(columns={"item": "task"})[["task", "worker", "label"]])
        row["crowd-kit DS s"] = time.perf_counter() - t
        row["crowd-kit DS"] = np.mean(ck.reindex(data.item_ids).to_numpy() == gold)
        row["crowd-kit source"] = "run here"
    elif (name, "crowdkit_converged") in bench_rows and DATA_DIR is not None:
        r = bench_rows[(name, "crowdkit_converged")]
        row["crowd-kit DS"], row["crowd-kit DS s"], row["crowd-kit source"] = r["accuracy"], r["median_s"], "bench JSON"
    rows.append(row)
accuracy = pd.DataFrame(rows).set_index("data")
accuracy.round(4)
'''),
    md("""
`fit_em s` includes tracing and compilation on the first call of each data shape (a few seconds); compiled, the
same call takes hundredths of a second (`docs/crowds.md`, "Measured on real crowds").

## The pooled (hierarchical) model with NUTS

With many workers who each label few items, `fit_nuts(..., pooling="partial")` draws every worker's channel
from a population whose median fpr / tpr and spread are learned; the orientation is fixed at the population's
level (median tpr > median fpr), so spammers and adversaries are estimated, not rejected. Workers with few
labels are pulled toward the population. Check R-hat, ESS, divergences and tree depth before reading any
posterior number.
"""),
    code('''
from noisycal_bayes.inference import fit_nuts

df_n, data_n, gold_n = sets[NUTS_SET]
if NUTS_ITEMS is not None:   # small mode: a subset of items (and the workers who labelled them)
    df_n = df_n[df_n["item"].isin(np.sort(df_n["item"].unique())[:NUTS_ITEMS])]
    data_n = AnnotationSet.from_crowdkit(df_n.rename(columns={"item": "task"}), gold=None)
t = time.perf_counter()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    pooled = fit_nuts(data_n, model="dawid_skene", pooling="partial", n_chains=N_CHAINS, n_warmup=N_WARMUP,
                      n_draws=N_DRAWS, seed=0, progress_bar=False)
wall = time.perf_counter() - t
diag = pooled.diagnostics
print(f"{NUTS_SET}: {data_n.n_items} items, {data_n.n_annotators} workers, {data_n.n_responses} labels; "
      f"{N_CHAINS} chains x {N_DRAWS} draws in {wall:.0f} s (compilation included)")
print(f"max R-hat {diag['r_hat'].max():.3f} | min bulk ESS {diag['ess_bulk'].min():.0f} | min tail ESS "
      f"{diag['ess_tail'].min():.0f} | divergences {pooled.n_divergent} | at max tree depth {pooled.details['n_max_depth']}")
for w in caught:
    print("warning:", str(w.message)[:160])
'''),
    code('''
pop = pooled.details["population"]
print(pd.DataFrame({r: {"population median": pop[r]["median"],
                        f"{pop['level']:.0%} interval of the median": np.round(pop[r]["median_interval"], 3),
                        f"middle {pop['level']:.0%} of workers": np.round(pop[r]["range"], 3),
                        "spread (sd, logit scale)": pop[r]["spread_logit"]} for r in ("fpr", "tpr")}).to_string())
fl = pooled.details["flagged"]
print("flagged by the pooled posterior (90% gap interval): uninformative", len(fl["uninformative"]),
      "| adversarial", len(fl["adversarial"]))
'''),
    code('''
# Shrinkage: pooled posterior means beside the channels counted against gold on the same items, and beside EM.
gold_n_tab = gold_channels(df_n)
post = pd.DataFrame({r: pooled.draws[r].mean(axis=(0, 1)) for r in ("fpr", "tpr")}, index=data_n.annotator_ids)
n_lab = df_n.groupby("worker").size().reindex(post.index)
em_tab = fits[NUTS_SET].annotators.set_index("annotator") if NUTS_ITEMS is None else None
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, r in zip(axes, ("fpr", "tpr")):
    sc = ax.scatter(gold_n_tab.loc[post.index, f"{r}_gold"], post[r], c=np.log10(n_lab), s=14, cmap="viridis",
                    label="pooled NUTS")
    if em_tab is not None:
        ax.scatter(gold_n_tab.loc[post.index, f"{r}_gold"], em_tab.loc[post.index, r], s=10, marker="x",
                   color="grey", alpha=0.5, label="EM")
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8)
    ax.axhline(pop[r]["median"], color="tab:red", lw=0.8, ls="--", label="population median")
    ax.set_xlabel(f"{r} counted against gold")
    ax.set_ylabel(f"{r} estimated without gold")
    ax.legend(fontsize=8)
fig.colorbar(sc, ax=axes, label="log10 labels of the worker")
for name, est in [("pooled NUTS", post)] + ([("EM", em_tab.loc[post.index])] if em_tab is not None else []):
    err = {r: np.average((est[r] - gold_n_tab.loc[post.index, f"{r}_gold"]).abs().fillna(0), weights=n_lab)
           for r in ("fpr", "tpr")}
    print(f"{name}: label-weighted |estimate - gold count|: fpr {err['fpr']:.4f}, tpr {err['tpr']:.4f}")
fig
'''),
    md("""
## Giving the fit 10% of the gold labels

Known clean labels for some items (say a verified subset) enter EM as observed latent labels: `T_i` is fixed
at the gold label. Here 10% of the items (chosen at random) pass their gold label to the fit; accuracy is
measured on the **other** 90% only, beside the fit without gold on the same items.
"""),
    code('''
rng = np.random.default_rng(0)
rows = []
for name, (df, data, gold) in sets.items():
    known = rng.random(data.n_items) < GOLD_SHARE
    given = pd.Series(gold[known], index=np.asarray(data.item_ids)[known])
    data_g = AnnotationSet.from_crowdkit(df.rename(columns={"item": "task"}), gold=given.to_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_g = fit_em(data_g, model="dawid_skene", starts="vote")
    held = ~known
    no_gold = (fits[name].clean_label_probability() > 0.5)[held] == gold[held]
    with_gold = (fit_g.clean_label_probability() > 0.5)[held] == gold[held]
    width = lambda f: float((f.annotators["gap_upper"] - f.annotators["gap_lower"]).median())
    rows.append({"data": name, "gold items given": int(known.sum()), "held-out items": int(held.sum()),
                 "accuracy, no gold": no_gold.mean(), "accuracy, 10% gold": with_gold.mean(),
                 "items changed": int((no_gold != with_gold).sum()),
                 "median gap-interval width, no gold": width(fits[name]), "with gold": width(fit_g),
                 "flagged, no gold": int((fits[name].annotators["flag"] != "ok").sum()),
                 "flagged, with gold": int((fit_g.annotators["flag"] != "ok").sum())})
pd.DataFrame(rows).set_index("data").round(4)
'''),
    md("""
## Answer, and what to watch out for

**Answer.** Keeping every worker works: on all three crowds EM fits in the crowd orientation without failing
(the EM part runs on the full sets in both modes). Measured here: accuracy against gold 0.898 / 0.9275 / 0.942
on bluebirds / rte / temp, against majority vote 0.759 / 0.875 / 0.933 and crowd-kit's converged Dawid–Skene
0.889 / 0.9275 / 0.942. The fitted channels are within 0.02–0.05 of the channels counted against gold
(label-weighted); the gold count lies inside the 90% interval for 88–97% of the workers once the interval is
extended to 0 or 1 where the estimate sits there, but only for 53–79% on rte and temp without that extension,
because many workers with 10–20 labels made no error on one class. Every "adversarial" worker on bluebirds
also has a negative gap against gold; most "uninformative" ones have a gold gap near 0 or too few labels.
Ten per cent of gold labels changed at most 2 held-out items on any set: these crowds already agree. The
pooled NUTS fit of rte (full mode: 4 chains, 500 + 750 draws, 176 s on a loaded 2-core machine) has max R-hat
1.007, min bulk ESS 657, no divergences; population median fpr 0.077 and tpr 0.871.

**Watch out.**
- "Uninformative" mixes spammers and honest workers with too few labels to tell: that is deliberate, such a
  gap gets weight 0 downstream, but it is not an accusation.
- The per-worker intervals hold other workers' channels fixed; for the covariance between workers use
  `bootstrap_em` or the pooled NUTS fit.
- The pooled model shrinks workers with few labels toward the population: their posterior means are not
  their own error rates. Read its numbers only after R-hat ≤ 1.01 and bulk ESS in the hundreds (small mode
  runs far too few draws for that; its warnings say so).
- A handful of gold labels changes little when the crowd already agrees; they matter most on items and workers
  the crowd cannot resolve on its own. The user guide's crowd section is `docs/crowds.md`.
"""),
]


# ------------------------------------------------------------------------------------------------ notebook 6
NB6 = [
    md("""
# 6. Multiclass calibration on CIFAR-10N (10 classes)

**Question.** A ResNet-50 gives every CIFAR-10 training image a probability for each of the ten classes.
Three crowd workers labelled each image and disagree with the original label on 17–18% of the images.
Is the top-label confidence calibrated, and can we tell, and fix it, from the noisy labels alone?

**Data.** `cifar10n_10class.csv` (50,000 items) from the shared data folder: labels `ann1..ann3` from CIFAR-10N —
J. Wei et al., *Learning with Noisy Labels Revisited: A Study Using Real-World Human Annotations*, ICLR 2022
(UCSC-REAL/cifar-10-100n, CC BY-NC 4.0) — on the images of CIFAR-10 (A. Krizhevsky, *Learning Multiple Layers
of Features from Tiny Images*, 2009); probabilities `p0..p9` are the 4-fold cross-validated ResNet-50 softmax
published with confident learning (C. Northcutt et al., cgnorthcutt/confidentlearning-reproduce, MIT). The
original CIFAR-10 label `y_ref` is used **for evaluation only**: it never enters a fit, a weight or a
recalibration map. It is an independent reference, not the truth (it has errors of its own). If the file is
absent, the notebook falls back to simulated data (`simulate_multiclass`, with known truth).
"""),
    code(SETUP + '''
N_ITEMS = 1500 if SMALL else None           # small mode: a random subsample; full mode: all 50,000 items
METHOD = "em" if SMALL else "nuts"          # EM + refitting item bootstrap (fast) or NUTS + propagation
N_BOOT = 10 if SMALL else 200               # bootstrap replicates (EM route)
N_CHAINS, N_WARMUP, N_DRAWS = 2, 1000, 1000  # NUTS route (full mode only)
BINS = 15                                   # equal-width confidence bins, as the reference figure 0.093 uses
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
# The shared data folder sits beside the main checkout (../shared) or beside the worktrees folder (../../shared).
CSV = next((p.resolve() for p in (REPO / ".." / "shared" / "data" / "cifar10n_10class.csv",
                                  REPO / ".." / ".." / "shared" / "data" / "cifar10n_10class.csv") if p.exists()),
           (REPO / ".." / "shared" / "data" / "cifar10n_10class.csv").resolve())
print("small mode" if SMALL else "full mode", "| data file:", CSV, "found" if CSV.exists() else "NOT found")
'''),
    md("""
## Load the labels and the class probabilities

Labels are stored as class indices 0..9 and mapped to the class names, so every table and figure names the
classes. Class `k` is column `p{k}` of the probabilities.
"""),
    code('''
from noisycal_bayes.data import MulticlassAnnotationSet

if CSV.exists():
    raw = pd.read_csv(CSV)
    sub = raw if N_ITEMS is None else raw.sample(n=N_ITEMS, random_state=0).sort_values("item")
    labels = sub.set_index("item")[["ann1", "ann2", "ann3"]].apply(lambda col: col.map(dict(enumerate(CLASSES))))
    data = MulticlassAnnotationSet.from_wide(labels, sub[[f"p{k}" for k in range(10)]].to_numpy(), classes=CLASSES)
    y_ref = sub["y_ref"].to_numpy()          # evaluation only
    source = "CIFAR-10N, 10 classes"
else:
    print("cifar10n_10class.csv is not available here: using simulated data instead.")
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(N_ITEMS or 50_000, 3, 10, accuracy=0.82, curve="overconfident", seed=0)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=10, classes=CLASSES,
                                                  probs=sim.probs)
    y_ref = np.asarray(sim.y)                # the simulated truth, evaluation only
    source = "simulated, 10 classes"
K, probs, yhat = data.n_classes, data.probs, data.probs.argmax(axis=1)
print(source, data)
print(f"top-1 accuracy against y_ref: {np.mean(yhat == y_ref):.3f}")
print("share of labels that differ from y_ref, per annotator:",
      {a: round(float(np.mean(data.labels[:, j] != y_ref)), 3) for j, a in enumerate(data.annotator_ids)})
'''),
    md("""
## Fit the annotators' confusion matrices and the calibration errors

Each annotator `j` has a 10 × 10 confusion matrix `C_j[y, a] = P(A_j = a | Y = y)`, the same for every image
of class `y`. The grouped model lets the class prevalence differ between score groups (predicted class ×
confidence half: 20 groups), and the label switching of the classes is removed by requiring the crowd's
average confusion matrix to be diagonally dominant. `evaluate_multiclass` fits the matrices from the three
labels alone, turns every label into a corrected clean-label vector (row `a` of `C_j^{-1}`, unbiased for the
one-hot clean label; the annotators combined with inverse-variance weights) and computes the top-label and
class-wise NC-ECE with intervals: in small mode by EM with an item bootstrap that refits the EM per replicate,
in full mode by NUTS with the posterior propagated (plus a Bayesian bootstrap of the items). It computes
the naive ECEs too.
"""),
    code('''
import time

from noisycal_bayes.evaluation import evaluate_multiclass

t = time.perf_counter()
ev = evaluate_multiclass(data, method=METHOD, bins=BINS, n_boot=N_BOOT, n_chains=N_CHAINS, n_warmup=N_WARMUP,
                         n_draws=N_DRAWS, seed=0)
print(f"{time.perf_counter() - t:.0f} s |", ev.method_detail)
print("diagnostics:", {k: (round(v, 3) if isinstance(v, float) else v) for k, v in ev.diagnostics.items()})
print("usable annotators:", dict(zip(ev.annotator_ids, ev.usable.tolist())))
for c in ev.checks:
    print(f"model check {c['name']}: {c['status']} ({c['detail'][:200]})")
for w in ev.warnings:
    print("warning:", w[:200])
'''),
    md("""
**Watch out.** With NUTS, read the numbers below only if R-hat ≤ 1.01, the bulk ESS is in the hundreds and
there are no divergences. The model check compares the observed (score group × label pattern) counts with
the model's predictive distribution; a warning there means the "noise depends on the class only" assumption
does not hold exactly.

## The confusion matrices

Top row: fitted from the annotators' labels only. Bottom row: the same annotators counted against `y_ref`
(evaluation only; `y_ref` itself is not perfect, so this is a rough check, not the truth).
"""),
    code('''
import matplotlib.pyplot as plt

from noisycal_bayes.plotting import plot_confusion_matrices

measured = np.zeros((data.n_annotators, K, K))
for j in range(data.n_annotators):
    seen = data.labels[:, j] >= 0
    np.add.at(measured[j], (y_ref[seen], data.labels[seen, j]), 1.0)
measured /= np.maximum(measured.sum(axis=2, keepdims=True), 1.0)   # rows: clean class (here y_ref)

fig, axes = plt.subplots(2, data.n_annotators, figsize=(6 * data.n_annotators, 11), layout="constrained")
plot_confusion_matrices(ev.confusion, classes=CLASSES, ax=axes[0],
                        annotators=[f"{a}: fitted ({ev.method})" for a in ev.annotator_ids])
plot_confusion_matrices(measured, classes=CLASSES, ax=axes[1],
                        annotators=[f"{a}: counted against y_ref" for a in ev.annotator_ids])
plt.close(fig)   # shown once, as the cell's result
fig
'''),
    code('''
diag = pd.DataFrame({f"{a} fitted": np.diagonal(ev.confusion[j]) for j, a in enumerate(ev.annotator_ids)}
                    | {f"{a} vs y_ref": np.diagonal(measured[j]) for j, a in enumerate(ev.annotator_ids)},
                    index=CLASSES)
print("largest |fitted - counted| over all cells:", round(float(np.abs(ev.confusion - measured).max()), 3))
diag.round(3)
'''),
    md("""
## The headline: top-label NC-ECE beside the reference-label ECE and the naive ECEs

Top-label ECE: equal-width bins on the confidence `max_k p_k`, comparing it with how often the predicted
class is right. The naive rows treat noisy labels as the truth: the majority vote, each annotator alone, and
the vote distribution (the top-label SMECE). The `y_ref` row is the evaluation-only reference.
"""),
    code('''
from noisycal_bayes.core import classwise_ece, top_label_ece

onehot_ref = np.eye(K)[y_ref]
ref_top, ref_cw = top_label_ece(probs, onehot_ref, bins=BINS), classwise_ece(probs, onehot_ref, bins=BINS)
top, cw = ev.nc_ece, ev.classwise_nc_ece
rows = [("NC-ECE (noise-corrected)", top.value, top.lower, top.upper, cw.value, cw.lower, cw.upper),
        ("ECE against y_ref (evaluation only)", ref_top.value, np.nan, np.nan, ref_cw.value, np.nan, np.nan)]
rows += [(f"naive: {r.target}", r.top_label_ece, np.nan, np.nan, r.classwise_ece, np.nan, np.nan)
         for r in ev.naive.itertuples()]
headline = pd.DataFrame(rows, columns=["calibration error", "top-label", "lower", "upper",
                                       "class-wise (mean)", "cw lower", "cw upper"]).set_index("calibration error")
print(f"{top.level:.0%} intervals; target: {top.target}")
headline.round(4)
'''),
    md("""
Class-wise NC-ECE, per class: each class's probability `p_k` against the corrected indicator of class `k`
(the mean over classes is the class-wise row above).
"""),
    code('''
per_class = cw.per_class.assign(**{"class": list(CLASSES), "ECE vs y_ref (evaluation only)": ref_cw.per_class})
per_class.set_index("class").round(4)
'''),
    md("""
## Corrected top-label reliability diagram

Per confidence bin, the corrected accuracy of the predicted class (with its interval) beside the accuracy
against the majority vote and the vote distribution, and against `y_ref` (evaluation only).
"""),
    code('''
from noisycal_bayes.plotting import plot_top_label_reliability

rel = ev.reliability
fig = plot_top_label_reliability(rel["mean_confidence"], rel["corrected_accuracy"], rel["band_lower"],
                                 rel["band_upper"], rel["count"], naive=ev.naive_curves, level=ev.level,
                                 title=f"Top-label reliability, {source}")
ax = fig.axes[0]   # the reference curve drawn separately: it is not a naive estimate
ax.plot(rel["mean_confidence"], ref_top.table.mean_target, "k^:", ms=4, label="against y_ref (evaluation only)")
ax.legend(fontsize=8, loc="upper left")
fig
'''),
    md("""
Where the two ECEs differ, bin by bin: each bin's term `(n_b / n) |accuracy - confidence|`, and how often the
annotators' labels differ from `y_ref` in that bin (evaluation only). If the noise depended on the class only,
that share would be about the same in every bin.
"""),
    code('''
b = np.minimum((probs.max(axis=1) * BINS).astype(int), BINS - 1)   # the equal-width confidence bins
by_bin = pd.DataFrame({"items": rel["count"].to_numpy(), "mean confidence": rel["mean_confidence"].to_numpy(),
                       "corrected accuracy": rel["corrected_accuracy"].to_numpy(),
                       "accuracy vs y_ref (evaluation only)": ref_top.table.mean_target})
for name, acc_col in [("NC-ECE term", "corrected accuracy"), ("y_ref ECE term", "accuracy vs y_ref (evaluation only)")]:
    by_bin[name] = by_bin["items"] / data.n_items * (by_bin[acc_col] - by_bin["mean confidence"]).abs()
differs = pd.Series((data.labels != y_ref[:, None]).mean(axis=1)).groupby(b).mean()
by_bin["labels differing from y_ref (evaluation only)"] = differs.reindex(range(BINS)).to_numpy()
by_bin[by_bin["items"] > 0].round(4)
'''),
    md("""
## Corrected temperature scaling: fit on one half, judge on the other

One temperature `T` with `q = softmax(log p / T)`, fitted by the corrected cross-entropy: the one-hot label
replaced by the corrected target vector of each image, built from the annotators' labels and the fitted
confusion matrices only (unbiased for the clean loss). The naive maps use the majority vote or the vote
distribution instead. Each map is fitted on a random half and judged on the other half: against `y_ref`
(evaluation only) and by the top-label NC-ECE, which needs no reference. The confusion matrices were
fitted on all items' noisy labels (no `y_ref` anywhere).
"""),
    code('''
from noisycal_bayes.core import annotator_weights, corrected_targets
from noisycal_bayes.recalibration import MulticlassTemperatureScaling, PosteriorMulticlassTemperature
from noisycal_bayes.reference import top_label_nc_ece

rng = np.random.default_rng(1)
in_fit = rng.permutation(data.n_items) < data.n_items // 2
part = {"fit": np.flatnonzero(in_fit), "test": np.flatnonzero(~in_fit)}
halves = {k: data.subset(v) for k, v in part.items()}
assert all(h.n_annotators == data.n_annotators for h in halves.values())   # annotator indices unchanged

conf = ev.confusion                                             # from the noisy labels only
prevalence = ev.prevalence[np.asarray(ev.fit.groups)].mean(axis=0)   # fitted overall clean-class frequencies
w = annotator_weights(conf, prevalence, rule="iv")
fit_half = halves["fit"]
targets = {"corrected (annotators + confusion)": np.asarray(corrected_targets(fit_half.responses, fit_half.n_items,
                                                                              conf, weights=w)),
           "naive: majority vote": np.eye(K)[fit_half.majority_vote()],
           "naive: vote distribution": fit_half.vote_distribution()}
maps = {name: MulticlassTemperatureScaling().fit(fit_half.probs, t) for name, t in targets.items()}

test = halves["test"]
y_test = y_ref[part["test"]]


def judge(q):
    return {"top-label ECE vs y_ref (evaluation only)": top_label_ece(q, np.eye(K)[y_test], bins=BINS).value,
            "top-label NC-ECE": top_label_nc_ece(q, test.responses, conf, prevalence=prevalence, bins=BINS).value,
            "NLL vs y_ref (evaluation only)": float(-np.mean(np.log(np.clip(q[np.arange(len(q)), y_test], 1e-12, 1))))}


rows = {"none": {"T": 1.0, **judge(test.probs)}}
rows |= {name: {"T": m.temperature_, **judge(m.predict_proba(test.probs))} for name, m in maps.items()}
pd.DataFrame(rows).T.round(4)
'''),
    md("""
How sure is the corrected temperature? `PosteriorMulticlassTemperature` refits it for each draw of the
confusion matrices (posterior draws with NUTS; the point estimate with EM, then only the items are
resampled), with a Bayesian bootstrap of the fitting half.
"""),
    code('''
draws = ev.fit.confusion if METHOD == "nuts" else conf
pt = PosteriorMulticlassTemperature(n_draws=200, seed=0).fit(fit_half.probs, fit_half.responses, draws,
                                                            prevalence=prevalence)
lo, hi = np.quantile(pt.temperature_draws_, [0.05, 0.95])
print(f"corrected temperature: median {pt.temperature_:.3f}, 90% interval [{lo:.3f}, {hi:.3f}] "
      f"({pt.n_draws_} draws, {pt.n_boundary_} on the boundary)")
'''),
    md("""
## Label issues: images whose majority label is probably wrong

The fitted model gives every image a posterior over its clean class, `P(Y_i = k | labels, score group)`.
Items are ranked by `P(majority label wrong)`. Items with three different labels have no real majority and
rank first; the table shows the top-ranked items that do have a 2-of-3 majority, with their three labels, the
model's prediction, and `y_ref` (evaluation only) to see how often the ranking finds a real disagreement.
"""),
    code('''
from noisycal_bayes.labels import corrected_accuracy_multiclass, multiclass_label_issues

clean = np.asarray(ev.fit.clean_label_probability(data))
issues = multiclass_label_issues(data, clean)
pos = pd.Index(data.item_ids).get_indexer(issues["item"])
names = np.array(CLASSES)
shown = issues.assign(**{str(a): [CLASSES[v] if v >= 0 else "" for v in data.labels[pos, j]]
                         for j, a in enumerate(data.annotator_ids)},
                      model=names[yhat[pos]], **{"y_ref (evaluation only)": names[y_ref[pos]]})
cols = ["rank", "item", *map(str, data.annotator_ids), "majority_label", "p_majority_wrong", "likely_class", "p_likely_class",
        "model", "y_ref (evaluation only)"]
for n_top in (20, 100, 500):
    top_pos = pos[:n_top]
    print(f"top {n_top}: majority vote differs from y_ref on {np.mean(data.majority_vote()[top_pos] != y_ref[top_pos]):.0%}, "
          f"likely class equals y_ref on {np.mean(clean[top_pos].argmax(axis=1) == y_ref[top_pos]):.0%}")
print(f"all items: majority vote differs from y_ref on {np.mean(data.majority_vote() != y_ref):.1%}; "
      f"{int(issues['tie'].sum())} items have three different labels (no majority: ties go to the lowest class index)")
shown.loc[~shown["tie"], cols].head(8).round(3)   # the top-ranked items that do have a 2-of-3 majority
'''),
    code('''
acc = corrected_accuracy_multiclass(probs, clean, responses=data, groups=np.asarray(ev.fit.groups), seed=0)
print(f"corrected top-1 accuracy {acc.accuracy:.3f} [{acc.lower:.3f}, {acc.upper:.3f}] ({acc.level:.0%}; "
      f"{acc.parameter_uncertainty}) | vs majority vote {acc.majority_accuracy:.3f} | vs single annotators "
      f"{acc.annotator_accuracy:.3f} | vs y_ref (evaluation only) {np.mean(yhat == y_ref):.3f}")
'''),
    md("""
## Answer, and what to watch out for

**Answer** (full mode, all 50,000 images; NUTS, 2 chains × 1000 draws; max R-hat 1.011, one confusion entry just
above 1.01; min bulk ESS 1826; no divergences). The model is over-confident, and the noisy labels alone say so.
Top-label NC-ECE 0.081, 90% interval [0.078, 0.085]; the ECE against `y_ref` is 0.093; the naive ECEs are 0.146
(majority vote), 0.215–0.221 (each annotator) and 0.218 (vote distribution). Class-wise: NC-ECE 0.0166 [0.0159,
0.0172] against 0.0189 for `y_ref` and 0.030–0.045 naive, and every class's NC-ECE lies within about 0.004 of
its `y_ref` value (cat and dog have the largest class-wise error by both measures). The fitted confusion
matrices are within 0.044 of those counted against `y_ref` in every cell. Corrected temperature scaling fitted
on one half (T = 1.85, 90% interval [1.79, 1.91]) lowers the held-out top-label ECE against `y_ref` from 0.092
to 0.034 (majority-vote fit 0.056, vote-distribution fit 0.133) and the held-out NC-ECE from 0.081 to 0.037. Of
the 500 images ranked most likely to carry a wrong majority label, all disagree with `y_ref`, and the model's
likely class equals `y_ref` for 91% of them. Corrected top-1 accuracy 0.856 against 0.858 for `y_ref`.

**The NC-ECE is closer to the reference ECE than any naive ECE, but not equal to it: its interval excludes
0.093.** The per-bin table shows where: every bin with more than 100 images agrees within 0.02 except the top
bin (confidence above 0.93, 83% of the images), where the corrected accuracy is 0.945 against 0.929 for `y_ref`
(terms 0.042 and 0.055). There the annotators' labels differ from `y_ref` about 16% of the time, against 23–29%
in lower bins: the noise depends on the image (confident images are easier for people too), not only on its
class, which the model assumes, and its predictive check rejects the model (posterior predictive p < 0.01). A
confusion matrix averaged over all images makes the annotators look worse than they are on the easy images, so
the correction over-corrects there and the NC-ECE comes out low. `y_ref` itself has errors, which push its ECE
up; this notebook cannot separate the two effects, and nothing here was tuned to `y_ref`.

**Watch out.**
- The model assumes each annotator's errors depend on the clean class only and that annotators err
  independently given the class; read every interval as conditional on that model (the check above warns).
- The grouped model's posterior over an image's clean class leans on its score group's prevalence, so label
  issues agree with the classifier more often than the labels alone would.
- The corrected temperature interval carries the confusion uncertainty and the sampling of the fitting half;
  the corrected accuracy interval here does not include the confusion uncertainty (it uses the
  posterior-mean clean-label probabilities).
- Small mode (1,500 images, EM with 10 bootstrap replicates) is for testing the code; its numbers move.
- CIFAR-10N's three label slots are treated as three annotators; each slot mixes many workers.
"""),
]


# ------------------------------------------------------------------------------------------------ notebook 7
NB7 = [
    md("""
# 7. The headline follows the evidence: model expansion on CIFAR-10N, binary and 10 classes

**Question.** Notebook 4 showed that the checks reject the paper's channel model on CIFAR-10N: the annotators'
errors depend on the image, not on its class alone. What does `evaluate` report then, how far does the richer
model move the headline, and does the result agree with the reference labels?

**Data.** `cifar10n_vehicle.csv` and `cifar10n_10class.csv` from the shared data folder: labels from CIFAR-10N
(J. Wei et al., ICLR 2022, UCSC-REAL/cifar-10-100n, CC BY-NC 4.0) on CIFAR-10 (A. Krizhevsky, 2009); scores and
probabilities are the cross-validated ResNet-50 outputs published with confident learning (C. Northcutt et al.,
cgnorthcutt/confidentlearning-reproduce, MIT). The original CIFAR-10 label `y_ref` is used **only** for the
reference ECE at the end of each part (it has errors of its own). Without the files the notebook uses simulated
data. Background: docs/model_checks.md, "The headline follows the evidence".
"""),
    code(SETUP + """
N_BINARY = 4000 if SMALL else 50000         # binary items (a random subsample in small mode)
N_MULTI = 3000 if SMALL else None           # 10-class items (None: all 50,000)
METHOD = "em"                               # both routes expand; the EM route needs no NUTS
N_BOOT = 40 if SMALL else 200               # bootstrap replicates
STRATA = (1, 2, 3) if SMALL else (1, 2, 3, 5)
# The shared data folder sits beside the main checkout (../shared) or beside the worktrees folder (../../shared).
def shared_csv(name):
    places = (REPO / ".." / "shared" / "data" / name, REPO / ".." / ".." / "shared" / "data" / name)
    return next((p.resolve() for p in places if p.exists()), places[0].resolve())
CSV, CSV10 = shared_csv("cifar10n_vehicle.csv"), shared_csv("cifar10n_10class.csv")
warnings.simplefilter("ignore", FutureWarning)
print("small mode" if SMALL else "full mode", "| binary:", "found" if CSV.exists() else "NOT found",
      "| 10 classes:", "found" if CSV10.exists() else "NOT found")
"""),
    md("""
## 1. Binary: vehicle vs. animal

`evaluate(..., expand=True)` fits the score-dependent channel model (channels per score group, partially pooled
toward the shared channel) beside the paper's shared channels, compares them by PSIS-LOO and stacks their NC-ECE
posteriors; with `expand=False` only the shared model is fitted. `expand="auto"` (the default) expands when a
predictive check warned.
"""),
    code("""
from noisycal_bayes import AnnotationSet, ece, evaluate

N_ITEMS = N_BINARY
""" + LOAD_VEHICLE.replace("{ok}", "").replace("{fallback}", "") + """
shared = evaluate(data, method=METHOD, n_boot=N_BOOT, expand=False, seed=0)
expanded = evaluate(data, method=METHOD, n_boot=N_BOOT, expand=True, seed=0)
reference = ece(data.scores, y_ref, bins=10)
print([(c["name"], c["status"]) for c in expanded.checks])
print(expanded.expansion.rule)
expanded.expansion.table.drop(columns=["fit"]).round(4)
"""),
    code("""
def row(name, nc):
    return {"model": name, "NC-ECE": nc.value, "lower": nc.lower, "upper": nc.upper}

table = pd.DataFrame([row("shared channels (expand=False)", shared.nc_ece),
                      row(f"headline with expansion ({expanded.headline_model})", expanded.nc_ece),
                      {"model": "reference labels (ECE)", "NC-ECE": reference}])
table["covers reference"] = [lo <= reference <= hi if pd.notna(lo) else None
                             for lo, hi in zip(table.lower, table.upper)]
table.round(4)
"""),
    md("""
## 2. Ten classes

The same idea for confusion matrices: every annotator gets one confusion matrix per confidence stratum (the two
equal-mass halves of `max_k p_ik`), fitted by the same route as the shared matrices, compared by PSIS-LOO and
stacked (`evaluate_multiclass(..., expand=True)`).
"""),
    code("""
from noisycal_bayes.data import MulticlassAnnotationSet
from noisycal_bayes.evaluation import evaluate_multiclass

if CSV10.exists():
    raw10 = pd.read_csv(CSV10)
    sub10 = raw10 if N_MULTI is None else raw10.sample(n=N_MULTI, random_state=0).sort_values("item")
    probs = sub10[[f"p{k}" for k in range(10)]].to_numpy()
    probs = probs / probs.sum(axis=1, keepdims=True)
    data10 = MulticlassAnnotationSet.from_wide(sub10.set_index("item")[["ann1", "ann2", "ann3"]], probs,
                                               classes=list(range(10)))
    y10 = sub10["y_ref"].to_numpy()
else:
    print("cifar10n_10class.csv is not available here: using simulated data instead.")
    from noisycal_bayes.simulate import simulate_multiclass

    sim = simulate_multiclass(N_MULTI or 50_000, 3, 10, accuracy=0.82, curve="overconfident", seed=0)
    data10, y10 = sim.data, np.asarray(sim.y)
probs = data10.probs
conf, hit = probs.max(axis=1), (probs.argmax(axis=1) == y10).astype(float)
edges = np.linspace(0, 1, 16)


def top_label_ece_of(idx):
    b = np.clip(np.digitize(conf[idx], edges[1:-1]), 0, 14)
    return sum(abs((hit[idx][b == k] - conf[idx][b == k]).sum()) for k in range(15)) / idx.size


reference10 = top_label_ece_of(np.arange(data10.n_items))
shared10 = evaluate_multiclass(data10, method=METHOD, n_boot=N_BOOT, expand=False, seed=0)
expanded10 = evaluate_multiclass(data10, method=METHOD, n_boot=N_BOOT, expand=True, seed=0)
print([(c["name"], c["status"]) for c in expanded10.checks])
if expanded10.expansion is not None:
    print(expanded10.expansion.rule)
    display(expanded10.expansion.table.drop(columns=["fit"]).round(4))
pd.DataFrame([row("shared confusion (expand=False)", shared10.nc_ece),
              row(f"headline with expansion ({expanded10.headline_model})", expanded10.nc_ece),
              {"model": "reference labels (top-label ECE)", "NC-ECE": reference10}]).round(4)
"""),
    md("""
## 3. Which assumption moves the 10-class estimate, and how far

The model expansion splits the confidence in two. To see the range the data allow, split it finer: fit a
Dawid–Skene model (one prevalence, a confusion matrix per annotator) on the items of each confidence stratum
separately, with the strata's borders on the evaluation bins' edges, so that the top-label NC-ECE of all items is
exactly the item-weighted sum of the strata's (every bin lies in one stratum). One stratum is the paper's
assumption (noise depends on the class only); more strata let the noise depend on how hard the image is.
"""),
    code("""
from noisycal_bayes.inference import fit_em
from noisycal_bayes.reference import top_label_nc_ece

r10 = data10.responses
item10, ann10, lab10 = np.asarray(r10.item), np.asarray(r10.annotator), np.asarray(r10.label)
rows = []
for n_strata in STRATA:
    # Stratum borders: the bin edges closest to equal-mass quantiles of the confidence.
    cuts = np.unique([edges[np.argmin(abs(edges - q))] for q in np.quantile(conf, np.linspace(0, 1, n_strata + 1)[1:-1])])
    if any(r["confidence strata"] == len(cuts) + 1 for r in rows):
        continue  # the snapped borders coincide with a coarser split's
    stratum = np.digitize(conf, cuts)
    total = 0.0
    for s_ in np.unique(stratum):
        idx = np.flatnonzero(stratum == s_)
        keep = np.isin(item10, idx)
        position = np.full(data10.n_items, -1)
        position[idx] = np.arange(idx.size)
        part = MulticlassAnnotationSet.from_responses(position[item10[keep]], ann10[keep], lab10[keep], n_classes=10,
                                                      n_annotators=data10.n_annotators, probs=probs[idx])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_s = fit_em(part, model="dawid_skene", seed=0)
            total += idx.size / data10.n_items * top_label_nc_ece(probs[idx], part, fit_s.confusion, bins=15).value
    rows.append({"confidence strata": len(cuts) + 1, "top-label NC-ECE": total})
strata = pd.DataFrame(rows)
strata["reference-label ECE"] = reference10
strata.round(4)
"""),
    md("""
**Answer.** On the full data (full mode, EM route; docs/model_checks.md has the run): binary, the checks warn,
the score-dependent model enters by PSIS-LOO and the headline's interval covers the reference-label ECE 0.0163,
where the shared model's excluded it. Ten classes: the shared confusion matrices give a top-label NC-ECE of
0.083 with an interval that ends below the reference 0.093; letting the confusion matrices differ between two
confidence halves moves it to about 0.086, and finer strata move it further (about 0.086 with one stratum
under Dawid–Skene, 0.091 with five), towards the reference: the assumption that moves the estimate is that the
annotators' errors do not depend on how confident (how hard) the image is. The range over the strata is the
range the data allow under that family of models.

**What to watch out for.** The reference labels are not the truth either (CIFAR-10 has label errors of its own),
so a gap between the headline and the reference can be theirs. Finer strata cost data: with few items per
stratum the confusion matrices are poorly determined, which is why the expansion inside `evaluate` stops at two.
Small mode uses subsamples, so its numbers differ.
"""),
]


NOTEBOOKS = {
    "01_cifar10n_posterior.ipynb": NB1,
    "02_small_gap_sensitivity.ipynb": NB2,
    "03_bayes_vs_closed_form.ipynb": NB3,
    "04_model_fit.ipynb": NB4,
    "05_real_crowds.ipynb": NB5,
    "06_multiclass_cifar10n.ipynb": NB6,
    "07_model_expansion.ipynb": NB7,
}


def build(directory: Path = HERE) -> list[Path]:
    paths = []
    for name, cells in NOTEBOOKS.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        for i, cell in enumerate(nb.cells):  # stable ids keep diffs small
            cell["id"] = f"{Path(name).stem[:2]}-{i:02d}"
        nbformat.validate(nb)
        path = directory / name
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for p in build():
        print("wrote", p)
