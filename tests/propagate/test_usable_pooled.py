"""Which annotators enter the K-class corrected targets of a partially pooled posterior (issue 34, part 3).

Pooled (IBCC) draws of a lightly active annotator are spread like the population's Dirichlet rows and often near
singular draw by draw; their posterior mean is invertible. The quantile rule over the draws (meant for unpooled,
likelihood-driven draws) would drop that annotator's labels; the pooled rule keeps them and still screens (and
names) an annotator whose posterior mean is singular.
"""
import warnings

import numpy as np
import pytest

from noisycal_bayes.core import confusion_condition
from noisycal_bayes.models.result import MulticlassPosterior
from noisycal_bayes.propagate import posterior_top_label_nc_ece
from noisycal_bayes.propagate.draws import usable_confusions_of
from noisycal_bayes.warnings import IdentifiabilityWarning

K, S = 5, 400


def _posterior(model, rng):
    good, mid = 0.7 * np.eye(K) + 0.3 / K, 0.5 * np.eye(K) + 0.5 / K
    light = np.stack([rng.dirichlet(2.0 * mid[y], size=S) for y in range(K)], axis=1)    # few labels: spread draws
    heavy = np.stack([rng.dirichlet(400.0 * good[y], size=S) for y in range(K)], axis=1)  # many labels: tight draws
    spam = rng.dirichlet(400.0 * np.full(K, 1.0 / K), size=(S, K))                       # rows alike: singular mean
    conf = np.stack([heavy, light, spam, heavy], axis=1)                                   # (S, J = 4, K, K)
    prev = np.full((S, 1, K), 1.0 / K)
    return MulticlassPosterior(confusion=conf, prevalence=prev, groups=np.zeros(60, np.int32), classes=tuple(range(K)),
                               model=model, diagnostics={}, n_chains=1, n_draws=S)


def test_pooled_draws_keep_light_annotators_and_screen_singular_ones():
    rng = np.random.default_rng(0)
    ibcc, grouped = _posterior("ibcc", rng), _posterior("grouped", np.random.default_rng(0))
    cond = confusion_condition(ibcc.confusion[:, 1])
    assert np.quantile(cond, 0.95) > 100 > confusion_condition(ibcc.confusion[:, 1].mean(axis=0)[None])[0]
    assert usable_confusions_of(ibcc).tolist() == [True, True, False, True]
    # Negative control: the same draws read as unpooled keep the quantile rule and drop the light annotator too.
    assert usable_confusions_of(grouped).tolist() == [True, False, False, True]
    # The screened annotator is named by the propagation, and no item is left out while a usable annotator labelled it.
    n = 60
    probs = rng.dirichlet(np.ones(K), size=n)
    item = np.repeat(np.arange(n), 2)
    ann = np.concatenate([[j % 2 + 1, 0 if j % 3 else 3] for j in range(n)])
    lab = rng.integers(0, K, size=item.size)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        posterior_top_label_nc_ece(probs, (item, ann, lab), ibcc.confusion[:50], bins=5, usable=usable_confusions_of(ibcc),
                                   bootstrap=False)
    texts = [str(w.message) for w in rec if issubclass(w.category, IdentifiabilityWarning)]
    assert any("annotators [2]" in t for t in texts), texts
    assert not any("have no response from an annotator with a usable" in str(w.message) for w in rec)


@pytest.mark.parametrize("model", ["ibcc", "pooled"])
def test_point_and_pooled_rules_agree_on_the_mean(model):
    # A pooled posterior is judged by its mean, as the EM route's point estimate is (ConfusionFit.usable_annotators).
    post = _posterior(model, np.random.default_rng(1))
    assert np.array_equal(usable_confusions_of(post), post.usable_annotators())
