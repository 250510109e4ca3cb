"""EM on a Dask dataframe (issue 16, item 8) against the in-memory sparse EM from the same start."""
import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

from noisycal_bayes import Binning  # noqa: E402
from noisycal_bayes.core.calibration import bin_index  # noqa: E402
from noisycal_bayes.inference.dask_em import fit_em_dask  # noqa: E402


def _crowd(seed=0, n=600, n_ann=20, per_item=4, repeats=0.05):
    """A sparse crowd with a spammer and an adversary, scores, gold for 10% of items and some repeated labels."""
    rng = np.random.default_rng(seed)
    z = rng.beta(1, 1, n)
    y = (rng.random(n) < z).astype(int)
    fpr, tpr = rng.uniform(0.05, 0.3, n_ann), rng.uniform(0.65, 0.95, n_ann)
    tpr[0] = fpr[0] = 0.5          # spammer
    fpr[1], tpr[1] = 0.8, 0.15     # adversary
    rows = []
    for i in range(n):
        for j in rng.choice(n_ann, per_item, replace=False):
            for _ in range(1 + int(rng.random() < repeats)):
                rows.append((f"t{i:04d}", f"w{j:02d}", int(rng.random() < (tpr[j] if y[i] else fpr[j])), z[i]))
    df = pd.DataFrame(rows, columns=["item", "annotator", "label", "score"])
    gold_items = rng.random(n) < 0.1
    df["gold"] = np.where(gold_items[df["item"].str[1:].astype(int)], y[df["item"].str[1:].astype(int)], np.nan)
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def _in_memory(df, n_iter, edges=None, gold=False):
    """An independent in-memory EM in plain NumPy (dense per-item sums), from the vote-fraction start."""
    items, ic = np.unique(df["item"], return_inverse=True)
    anns, ac = np.unique(df["annotator"], return_inverse=True)
    a = df["label"].to_numpy(dtype=float)
    per_item = df.drop_duplicates("item").set_index("item").loc[items]
    group = np.zeros(len(items), int) if edges is None else bin_index(per_item["score"].to_numpy(), edges)
    g = np.nan_to_num(per_item["gold"].to_numpy(), nan=-1) if gold else np.full(len(items), -1.0)
    n_groups = 1 if edges is None else len(edges) - 1

    def m_step(t):
        w1 = t[ic]
        tpr = np.bincount(ac, w1 * a) / np.bincount(ac, w1)
        fpr = np.bincount(ac, (1 - w1) * a) / np.bincount(ac, 1 - w1)
        prev = np.bincount(group, t, n_groups) / np.bincount(group, minlength=n_groups)
        return fpr, tpr, prev

    def e_step(theta):
        fpr, tpr, prev = theta
        log1 = np.log(prev[group]) + np.bincount(ic, a * np.log(tpr[ac]) + (1 - a) * np.log1p(-tpr[ac]), len(items))
        log0 = np.log1p(-prev[group]) + np.bincount(ic, a * np.log(fpr[ac]) + (1 - a) * np.log1p(-fpr[ac]), len(items))
        log1 = np.where(g == 0, -np.inf, log1)
        log0 = np.where(g == 1, -np.inf, log0)
        return np.logaddexp(log0, log1).sum(), np.exp(log1 - np.logaddexp(log0, log1))

    t = np.bincount(ic, a) / np.bincount(ic)
    theta = m_step(np.where(g >= 0, g, t))
    for _ in range(n_iter):
        theta = m_step(e_step(theta)[1])
    return theta, e_step(theta)[0]


@pytest.fixture(scope="module")
def crowd():
    return _crowd()


@pytest.mark.parametrize("grouped", [False, True])
def test_equals_in_memory_sparse_em(crowd, grouped):
    groups = Binning.equal_width(3) if grouped else None
    with dask.config.set(scheduler="synchronous"):
        out = fit_em_dask(dd.from_pandas(crowd, npartitions=5), score="score" if grouped else None, gold="gold",
                          groups=groups, tol=1e-10)
    assert out["converged"] and out["n_items"] == crowd["item"].nunique() and out["n_responses"] == len(crowd)
    theta, ll = _in_memory(crowd, out["n_iter"], out["edges"], gold=True)
    fpr, tpr, prev = theta
    if out["label_exchanged"]:
        fpr, tpr, prev = tpr, fpr, 1 - prev
    np.testing.assert_allclose(out["fpr"], fpr, atol=1e-10)
    np.testing.assert_allclose(out["tpr"], tpr, atol=1e-10)
    np.testing.assert_allclose(out["prevalence"], prev, atol=1e-10)
    np.testing.assert_allclose(out["loglik"], ll, rtol=1e-12)
    gap = out["tpr"] - out["fpr"]
    assert abs(gap[0]) < 0.25 and gap[1] < -0.3  # the spammer and the adversary keep their own gaps


def test_local_cluster_equals_synchronous(crowd):
    distributed = pytest.importorskip("distributed")
    ddf = dd.from_pandas(crowd, npartitions=4)
    with dask.config.set(scheduler="synchronous"):
        sync = fit_em_dask(ddf)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        dist = fit_em_dask(ddf)
    assert dist["n_iter"] == sync["n_iter"]
    np.testing.assert_allclose(dist["tpr"], sync["tpr"], atol=1e-12)
    np.testing.assert_allclose(dist["fpr"], sync["fpr"], atol=1e-12)


def test_label_exchange_gives_the_exchanged_fit(crowd):
    flipped = crowd.assign(label=1 - crowd["label"])
    with dask.config.set(scheduler="synchronous"):
        a = fit_em_dask(dd.from_pandas(crowd, npartitions=3))
        b = fit_em_dask(dd.from_pandas(flipped, npartitions=3))
    # Flipping every response (A -> 1 - A) gives rates (1 - fpr, 1 - tpr) for the same clean labels, a negative
    # crowd gap; oriented (Y <-> 1 - Y: by the vote-fraction start already, or by the exchange) that is
    # (1 - tpr, 1 - fpr, 1 - prevalence), iterate by iterate.
    assert a["n_iter"] == b["n_iter"]
    np.testing.assert_allclose(b["fpr"], 1 - a["tpr"], atol=1e-10)
    np.testing.assert_allclose(b["tpr"], 1 - a["fpr"], atol=1e-10)
    np.testing.assert_allclose(b["prevalence"], 1 - a["prevalence"], atol=1e-10)
    np.testing.assert_allclose(b["loglik"], a["loglik"], rtol=1e-12)


def test_bad_input(crowd):
    ddf = dd.from_pandas(crowd, npartitions=2)
    with pytest.raises(ValueError, match="missing column"):
        fit_em_dask(ddf, label="answer")
    with pytest.raises(ValueError, match="need a score column"):
        fit_em_dask(ddf, groups=Binning.equal_mass(3))
    bad = crowd.copy()
    bad.loc[3, "label"] = 2
    with dask.config.set(scheduler="synchronous"), pytest.raises(ValueError, match="must be 0 or 1"):
        fit_em_dask(dd.from_pandas(bad, npartitions=2))
    with dask.config.set(scheduler="synchronous"), pytest.raises(ValueError, match="split across partitions"):
        fit_em_dask(ddf, partitioned_by_item=True)


# ------------------------------------------------------------------------------------------------ K classes
CLASSES = ["ant", "bee", "cat"]


@pytest.fixture(scope="module")
def class_crowd():
    """A sparse K = 3 crowd (20 annotators, 3 labels per item, 5% repeats), gold for 10% of the items, score groups;
    its long frame with class names and the MulticlassAnnotationSet of the same responses."""
    from noisycal_bayes import MulticlassAnnotationSet
    from noisycal_bayes.core import score_groups
    from noisycal_bayes.simulate import simulate_multiclass

    n = 500
    sim = simulate_multiclass(n, 20, 3, labels_per_item=3, repeat_rate=0.05, seed=4)
    gold = np.where(np.random.default_rng(4).random(n) < 0.1, np.argmax(sim.probs, axis=1), -1)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, classes=CLASSES, probs=sim.probs,
                                                  gold=gold, item_ids=[f"t{i:04d}" for i in range(n)],
                                                  annotator_ids=[f"w{j:02d}" for j in range(20)])
    group = score_groups(data.probs)
    long = data.to_long()
    pos = long["item"].str[1:].astype(int).to_numpy()
    long["group"] = group[pos]
    long["gold"] = np.where(gold[pos] >= 0, np.asarray(CLASSES, object)[np.maximum(gold[pos], 0)], None)
    return long.sample(frac=1.0, random_state=0).reset_index(drop=True), data, group


def test_k_class_equals_in_memory_sparse_em(class_crowd):
    """The Dask rounds are fit_em_multiclass's sparse EM from its vote start (n_starts=0, plain steps): the same
    iterates to rounding (sums in another order), the same stopping iteration and orientation."""
    import warnings

    from noisycal_bayes import fit_em_multiclass

    long, data, group = class_crowd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fit_em_multiclass(data, groups=group, n_starts=0, path="sparse", accelerate=False, tol=1e-7)
    with dask.config.set(scheduler="synchronous"):
        out = fit_em_dask(dd.from_pandas(long, npartitions=3), classes=CLASSES, group="group", gold="gold", tol=1e-7)
    assert (out["n_iter"], out["converged"], out["label_permutation"]) == (ref.n_iter, ref.converged,
                                                                           ref.label_permutation)
    assert out["n_items"] == data.n_items and out["n_responses"] == data.n_responses and out["n_groups"] == 6
    np.testing.assert_allclose(out["confusion"], ref.confusion, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out["prevalence"], ref.prevalence, rtol=0, atol=1e-9)
    np.testing.assert_allclose(out["trace"], ref.loglik_trace, rtol=1e-12)
    assert out["loglik"] == pytest.approx(ref.log_likelihood, rel=1e-12)
    np.testing.assert_array_equal(out["n_labels"], ref.n_labels)
    assert out["annotator_ids"] == list(data.annotator_ids) and out["classes"] == tuple(CLASSES)


def test_k_class_bad_input_names_the_entries(class_crowd):
    long = class_crowd[0]
    with pytest.raises(ValueError, match="`group` .* is for K classes"):
        fit_em_dask(dd.from_pandas(long, npartitions=2), group="group")
    with pytest.raises(ValueError, match="`score` and `groups` are for binary data"):
        fit_em_dask(dd.from_pandas(long, npartitions=2), classes=CLASSES, groups=Binning.equal_width(2), score="group")
    bad = long.copy()
    bad.loc[5, "label"] = "emu"
    item = bad.loc[5, "item"]
    with dask.config.set(scheduler="synchronous"), \
            pytest.raises(ValueError, match=rf"\['emu'\], which are not among the classes .* at items \['{item}'\]"):
        fit_em_dask(dd.from_pandas(bad, npartitions=2), classes=CLASSES)
    bad = long.copy()
    rows = np.flatnonzero(bad["item"] == item)
    bad.loc[rows[0], "group"] = 7 if bad.loc[rows[0], "group"] != 7 else 6
    with dask.config.set(scheduler="synchronous"), \
            pytest.raises(ValueError, match=rf"same group in `group`; not so for items \['{item}'\]"):
        fit_em_dask(dd.from_pandas(bad, npartitions=2), classes=CLASSES, group="group")
    with dask.config.set(scheduler="synchronous"), pytest.raises(ValueError, match="For K classes pass `classes=`"):
        fit_em_dask(dd.from_pandas(long, npartitions=2))
