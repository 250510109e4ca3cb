"""Real data: CIFAR-10N binary vehicle-vs-animal labels, channels fitted without the reference labels.

Data: ``cifar10n_vehicle.csv`` of the shared data folder (50,000 CIFAR-10 training images). Labels: CIFAR-10N,
Wei et al., "Learning with Noisy Labels Revisited: A Study Using Real-World Human Annotations", ICLR
2022 (repository UCSC-REAL/cifar-10-100n, licence CC BY-NC 4.0). Scores: cross-validated ResNet-50
probabilities from confident learning, Northcutt et al. (repository cgnorthcutt/confidentlearning-
reproduce, MIT licence). See the data README.

Claim tested: the grouped model (3 exchangeable annotator slots, 5 equal-mass score groups), fitted on
the three noisy labels only, gives 99% posterior intervals for each slot's fpr and tpr that contain the
flip rates measured against the original CIFAR-10 label ``y_ref`` (which is never used for fitting).
Not a tolerance test: the interval either contains the measured rate or it does not. Measured when this
test was written (4 chains x 250 draws): posterior means fpr (0.0418, 0.0464, 0.0428) and tpr
(0.9569, 0.9495, 0.9512), sd about 0.0012-0.0016; reference rates fpr (0.0429, 0.0477, 0.0438), tpr
(0.9557, 0.9480, 0.9501): every difference within about 1.1 posterior sd.
"""
import os
import warnings

import numpy as np
import pandas as pd
import pytest

from noisycal_bayes.data import AnnotationSet
from noisycal_bayes.inference import fit_nuts
from noisycal_bayes.data import Binning
from noisycal_bayes.experiments.real_data import SHARED_DATA_HINT, shared_data_path

pytestmark = pytest.mark.statistical

PATH = os.environ.get("NOISYCAL_CIFAR10N") or str(shared_data_path("cifar10n_vehicle.csv") or "cifar10n_vehicle.csv")


@pytest.fixture(scope="module")
def cifar():
    if not os.path.exists(PATH):
        pytest.skip(f"real-data test skipped: {PATH} is absent ({SHARED_DATA_HINT}, or NOISYCAL_CIFAR10N to the file)")
    df = pd.read_csv(PATH, usecols=["score", "y_ref", "ann1", "ann2", "ann3"])
    labels = df[["ann1", "ann2", "ann3"]].to_numpy()
    return AnnotationSet.from_wide(labels, df["score"].to_numpy()), df["y_ref"].to_numpy()


def test_channel_intervals_cover_flip_rates_measured_against_reference_labels(cifar):
    data, y_ref = cifar
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R-hat noise at 1000 draws is reported, not tested, here
        fit = fit_nuts(data, groups=Binning.equal_mass(5), n_chains=4, n_warmup=200, n_draws=250, seed=0, progress_bar=False)
    assert fit.diagnostics["r_hat"].max() < 1.05 and fit.diagnostics["ess_bulk"].min() > 200
    labels = data.labels
    measured = {"fpr": labels[y_ref == 0].mean(axis=0), "tpr": labels[y_ref == 1].mean(axis=0)}
    report = []
    for name, ref in measured.items():
        d = fit.draws[name].reshape(-1, 3)
        lo, hi = np.quantile(d, [0.005, 0.995], axis=0)
        report.append(f"{name}: mean {np.round(d.mean(0), 4)} 99% [{np.round(lo, 4)}, {np.round(hi, 4)}] "
                      f"measured {np.round(ref, 4)}")
        assert np.all((lo <= ref) & (ref <= hi)), "; ".join(report)
    print("\n".join(report))
