"""evaluate_multiclass / evaluate(MulticlassAnnotationSet): K = 2 equals the binary reference, relabelling the
classes permutes the results and changes nothing else, independent routes agree, bad input is refused."""
import json

import numpy as np
import pytest

from noisycal_bayes import evaluate, simulate_annotations
from noisycal_bayes.core import top_label_ece
from noisycal_bayes.data import Binning, Channel, MulticlassAnnotationSet
from noisycal_bayes.evaluation import MulticlassEvaluation, evaluate_multiclass
from noisycal_bayes.models.priors import MulticlassPrior
from noisycal_bayes.reference.calibration import classwise_nc_ece, top_label_nc_ece
from noisycal_bayes.simulate import simulate_multiclass

NAMES = ("bird", "cat", "dog")
N_BOOT = 20


def _data(sim, classes=None, perm=None):
    """A MulticlassAnnotationSet of a simulation; ``perm`` relabels class k as perm[k] (probs columns moved along)."""
    k = sim.probs.shape[1]
    label, probs, names = np.asarray(sim.label), np.asarray(sim.probs), classes
    if perm is not None:
        perm = np.asarray(perm)
        label = perm[label]
        probs = np.empty_like(probs)
        probs[:, perm] = sim.probs
        names = [None] * k
        for old, new in enumerate(perm):
            names[new] = classes[old]
    return MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, label, n_classes=k, probs=probs,
                                                  classes=None if names is None else tuple(names))


@pytest.fixture(scope="module")
def k3():
    sim = simulate_multiclass(240, 3, 3, accuracy=0.8, seed=4)
    data = _data(sim, NAMES)
    return sim, data, evaluate_multiclass(data, n_boot=N_BOOT, clean_labels=sim.y, checks=False)


def test_headline_is_the_reference_top_label_nc_ece_at_the_point_confusion(k3):
    sim, data, ev = k3
    assert isinstance(ev, MulticlassEvaluation) and ev.n_classes == 3 and ev.classes == NAMES
    # Independent route: the reference functions at the evaluation's point confusion matrices.
    ref = top_label_nc_ece(data.probs, data.responses, ev.confusion, bins=15)
    cw = classwise_nc_ece(data.probs, data.responses, ev.confusion, bins=15)
    assert ev.nc_ece.value == pytest.approx(ref.value, abs=1e-12)
    assert ev.classwise_nc_ece.value == pytest.approx(cw.value, abs=1e-12)
    np.testing.assert_allclose(ev.classwise_nc_ece.per_class["value"], cw.per_class, atol=1e-12)
    assert list(ev.classwise_nc_ece.per_class["class"]) == list(NAMES)
    assert ev.nc_ece.lower <= ev.nc_ece.upper and ev.nc_ece.level == 0.9
    assert ev.classwise_nc_ece.lower <= ev.classwise_nc_ece.upper
    assert ev.confusion.shape == (3, 3, 3) and np.allclose(ev.confusion.sum(axis=-1), 1)
    assert np.all(ev.confusion_lower <= ev.confusion_upper)
    # Reliability table: counts add up to the items; the corrected accuracies reproduce the headline.
    t = ev.reliability
    assert int(t["count"].sum()) == data.n_items
    ok = t["count"].to_numpy() > 0
    recon = np.sum(t["count"].to_numpy()[ok] * np.abs(t["corrected_accuracy"] - t["mean_confidence"]).to_numpy()[ok])
    assert recon / data.n_items == pytest.approx(ev.nc_ece.value, abs=1e-12)
    assert np.isfinite(t.loc[ok, "band_lower"]).all()
    # Naive majority-vote ECE from the core function with one-hot majority labels (ties to the lowest index).
    mv = np.eye(3)[data.majority_vote()]
    naive = dict(zip(ev.naive["target"], ev.naive["top_label_ece"]))
    assert naive["majority_vote"] == pytest.approx(top_label_ece(data.probs, mv, bins=15).value, abs=1e-12)
    assert naive["clean labels (oracle)"] == pytest.approx(
        top_label_ece(data.probs, np.eye(3)[sim.y], bins=15).value, abs=1e-12)
    assert ev.checks == ()  # checks=False


def test_relabelling_the_classes_permutes_the_results_and_changes_nothing_else(k3):
    sim, data, ev = k3
    perm = [2, 0, 1]
    ev2 = evaluate_multiclass(_data(sim, NAMES, perm), n_boot=N_BOOT, clean_labels=np.asarray(perm)[sim.y],
                              checks=False)
    # EM stops at parameter changes <= 1e-8; the NC-ECE moves by at most a small multiple of that: 1e-6.
    assert ev2.nc_ece.value == pytest.approx(ev.nc_ece.value, abs=1e-6)
    assert ev2.classwise_nc_ece.value == pytest.approx(ev.classwise_nc_ece.value, abs=1e-6)
    # Same resampled items per replicate (same seed), same refits up to the tolerance: same interval.
    assert ev2.nc_ece.lower == pytest.approx(ev.nc_ece.lower, abs=1e-6)
    assert ev2.nc_ece.upper == pytest.approx(ev.nc_ece.upper, abs=1e-6)
    by_name = dict(zip(ev.classwise_nc_ece.per_class["class"], ev.classwise_nc_ece.per_class["value"]))
    by_name2 = dict(zip(ev2.classwise_nc_ece.per_class["class"], ev2.classwise_nc_ece.per_class["value"]))
    assert by_name2 == pytest.approx(by_name, abs=1e-6)
    p = np.asarray(perm)
    np.testing.assert_allclose(ev2.confusion[:, p][:, :, p], ev.confusion, atol=1e-6)
    np.testing.assert_allclose(ev2.reliability["corrected_accuracy"], ev.reliability["corrected_accuracy"], atol=1e-6)
    # Naive ECEs do not depend on the labelling, except the majority vote through its ties (broken toward the lowest
    # class index, a documented convention): compare it on the runs where it cannot matter.
    naive = dict(zip(ev.naive["target"], ev.naive["top_label_ece"]))
    naive2 = dict(zip(ev2.naive["target"], ev2.naive["top_label_ece"]))
    if data.n_ties:
        naive.pop("majority_vote"), naive2.pop("majority_vote")
    assert naive2 == pytest.approx(naive, abs=1e-12)


def test_bad_input_is_refused_before_fitting(k3):
    sim, data, _ = k3
    binary = simulate_annotations(20, fpr=[0.1, 0.2], tpr=[0.9, 0.8], seed=0).data
    with pytest.raises(ValueError, match="must be a MulticlassAnnotationSet"):
        evaluate_multiclass(binary)
    with pytest.raises(ValueError, match="`weights` must be one of"):
        evaluate_multiclass(data, weights="gap")
    with pytest.raises(ValueError, match="unknown method"):
        evaluate_multiclass(data, method="vi")
    with pytest.raises(ValueError, match="`groups` must be None"):
        evaluate_multiclass(data, groups=0)
    with pytest.raises(ValueError, match="`prior` is used by method='nuts' only"):
        evaluate_multiclass(data, prior=MulticlassPrior())  # the EM route is maximum likelihood
    with pytest.raises(ValueError, match="`prior` must be None or a MulticlassPrior; got float"):
        evaluate_multiclass(data, method="nuts", prior=0.5)
    with pytest.raises(ValueError, match="class indices in 0..2"):
        evaluate_multiclass(data, clean_labels=np.full(data.n_items, 3))
    with pytest.raises(ValueError, match="apply to binary data only"):
        evaluate(data, recalibration=True)
    no_probs = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=3)
    with pytest.raises(ValueError, match="probs"):
        evaluate_multiclass(no_probs)
    one = MulticlassAnnotationSet.from_responses([0, 1, 2], [0, 0, 0], [0, 1, 2], probs=np.full((3, 3), 1 / 3))
    with pytest.raises(ValueError, match="single annotator"):
        evaluate_multiclass(one)
    # Each item labelled by one annotator only: K x K channels are not identified (check_multiclass_design).
    lone = MulticlassAnnotationSet.from_responses(np.arange(6), np.arange(6) % 3, np.arange(6) % 3,
                                                  probs=np.eye(3)[np.arange(6) % 3] * 0.7 + 0.1)
    with pytest.raises(ValueError, match="two or more annotators"):
        evaluate_multiclass(lone)


def _correlated(n, k, seed):
    """Labels that break conditional independence given the clean class: half the items are easy (every annotator
    right with probability 0.95), half are hard (every annotator uniform over the classes), so that given Y the
    annotators are right together far more often than independent annotators with the same accuracy."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    logits = 2.0 * np.eye(k)[y] + rng.normal(size=(n, k))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    easy = rng.random(n) < 0.5
    right = np.where(easy[:, None], rng.random((n, 3)) < 0.95, False)
    lab = np.where(right, y[:, None], rng.integers(0, k, (n, 3)))
    return MulticlassAnnotationSet.from_responses(np.repeat(np.arange(n), 3), np.tile(np.arange(3), n),
                                                  lab.reshape(-1), n_classes=k, probs=probs)


@pytest.mark.slow
def test_nuts_route_and_its_predictive_check_with_a_negative_control():
    """NUTS route end to end. The posterior predictive check is conservative (false-alarm rate at most
    CHECK_ALPHA = 0.05 under the model), so data from the model pass at this seed; labels whose errors depend on
    the item's difficulty (conditional independence given the clean class broken) must warn."""
    # One confidence quantile (3 score groups): enough items per family for degrees of freedom after pooling.
    sim = simulate_multiclass(800, 3, 3, accuracy=0.8, seed=11)
    data = _data(sim, NAMES)
    ev = evaluate_multiclass(data, method="nuts", groups=1, n_chains=2, n_warmup=300, n_draws=300, seed=1)
    assert ev.method == "nuts" and ev.diagnostics["n_divergent"] == 0
    assert ev.nc_ece.lower <= ev.nc_ece.upper and ev.nc_ece.debiased is not None
    ref = top_label_nc_ece(data.probs, data.responses, ev.confusion, bins=15)
    assert ev.nc_ece.value == pytest.approx(ref.value, abs=1e-12)
    assert np.all(ev.confusion_lower <= ev.confusion) and np.all(ev.confusion <= ev.confusion_upper)
    assert ev.checks[0]["status"] == "pass", ev.checks
    bad = evaluate_multiclass(_correlated(600, 3, seed=2), method="nuts", groups=1, n_chains=2, n_warmup=300,
                              n_draws=300, seed=1)
    assert bad.checks[0]["status"] == "warn" and bad.checks[0]["p_value"] < 0.05, bad.checks


@pytest.mark.slow
def test_em_bootstrap_check_and_its_negative_control():
    """The EM route's parametric-bootstrap check (calibrated: warns with probability 0.05 under the model) passes
    on data from the model at this seed and must warn on labels whose errors depend on item difficulty."""
    sim = simulate_multiclass(1000, 3, 3, accuracy=0.8, seed=4)  # 240 items: no df left after pooling
    ok = evaluate_multiclass(_data(sim, NAMES), n_boot=0)
    assert ok.checks[0]["status"] == "pass" and "parametric bootstrap" in ok.checks[0]["detail"], ok.checks
    bad = evaluate_multiclass(_correlated(600, 3, seed=2), n_boot=0)
    assert bad.checks[0]["status"] == "warn" and bad.checks[0]["p_value"] < 0.05, bad.checks


def test_check_cell_probabilities_are_the_model_s():
    """The check's per-family pattern probabilities equal a direct sum over the clean class, and sum to 1."""
    from noisycal_bayes.diagnostics.checks import _Families

    rng = np.random.default_rng(0)
    conf = rng.dirichlet(np.ones(3) * 2, size=(3, 3))
    prev = rng.dirichlet(np.ones(3), size=2)
    item = np.array([0, 0, 0, 1, 1, 2, 2, 2])
    ann = np.array([0, 1, 2, 0, 2, 0, 1, 2])
    lab = np.array([0, 1, 2, 2, 2, 1, 1, 0])
    fam = _Families(item, ann, lab, 3, 3, 3, np.array([1, 0, 1]))
    for f in range(len(fam.members)):
        js, g = fam.annotators[f], fam.group[f]
        prob = fam.probs(f, conf, prev)
        assert prob.sum() == pytest.approx(1, abs=1e-12)
        for code in range(prob.size):
            a = [(code // 3 ** m) % 3 for m in range(js.size)]  # base-3 digits, first annotator least significant
            direct = sum(prev[g, y] * np.prod([conf[j, y, a_m] for j, a_m in zip(js, a)]) for y in range(3))
            assert prob[code] == pytest.approx(direct, abs=1e-14)
    # Families: (group 1, all three annotators) holds items 0 and 2, (group 0, annotators 0 and 2) item 1.
    counts = fam.counts(fam.dense)
    assert [m.tolist() for m in fam.members] == [[1], [0, 2]] and fam.n_cells == 9 + 27
    assert counts[0][2 + 3 * 2] == 1 and counts[1][0 + 3 * 1 + 9 * 2] == 1 and counts[1][1 + 3 * 1] == 1


def test_em_route_intervals_are_its_bootstrap_refits_propagated(k3):
    """Independent route: the replicates' rows regenerated from the seed, the grouped EM refitted on each from the
    full-sample fit, then the propagation functions (joint draws: each refit with its own item multiplicities, top-label
    at the calibrated level) give the EM route's intervals exactly."""
    from noisycal_bayes.inference import multiclass_em_estimator
    from noisycal_bayes.propagate import posterior_classwise_nc_ece, posterior_top_label_nc_ece
    from noisycal_bayes.reference.calibration import check_responses
    from noisycal_bayes.reference.nc_ece_bootstrap import _resample

    sim, data, ev = k3
    n, k = data.n_items, data.n_classes
    resp = check_responses(data.responses, n, k)
    refit = multiclass_em_estimator(model="grouped", n_quantiles=2, n_starts=1, seed=ev.seed)
    init = (np.asarray(ev.fit.confusion), np.asarray(ev.fit.prevalence))
    rng = np.random.default_rng(ev.seed)
    reps, counts = [], []
    for _ in range(N_BOOT):
        rows = rng.integers(0, n, size=n)
        rep = _resample(resp, rows)
        assert np.unique(rep[1]).size == data.n_annotators  # no replicate skipped in this design
        reps.append(np.asarray(refit(rep, n, data.probs[rows], init=init)[0]))
        counts.append(np.bincount(rows, minlength=n))
    reps = np.stack(reps)
    np.testing.assert_allclose(ev.confusion_lower, np.quantile(reps, 0.05, axis=0), atol=1e-9)
    usable = ev.usable
    # The refits' bias correction is centred on the full-sample fit they were refitted from (point_confusion).
    top = posterior_top_label_nc_ece(data.probs, data.responses, reps, usable=usable, seed=ev.seed,
                                     item_weights=np.stack(counts), calibrate=True, point_confusion=init[0])
    cw = posterior_classwise_nc_ece(data.probs, data.responses, reps, usable=usable, seed=ev.seed,
                                    item_weights=np.stack(counts), point_confusion=init[0])
    assert (ev.nc_ece.lower, ev.nc_ece.upper) == pytest.approx(top.reported_interval, abs=1e-9)
    assert ev.nc_ece.value == pytest.approx(top.value, abs=1e-12)  # the point estimate at the fit
    centred_on_mean = posterior_top_label_nc_ece(data.probs, data.responses, reps, usable=usable, seed=ev.seed,
                                                 item_weights=np.stack(counts), calibrate=True)
    assert centred_on_mean.debiased != pytest.approx(top.debiased, abs=1e-6)  # a negative control: the fit is used
    assert ev.nc_ece.debiased == pytest.approx(top.debiased, abs=1e-9)
    assert (ev.classwise_nc_ece.lower, ev.classwise_nc_ece.upper) == pytest.approx(cw.reported_interval, abs=1e-9)
    # The method line says at which level of the draws' quantiles the interval to read was read, when calibrated.
    for summary, res in ((ev.nc_ece, top), (ev.classwise_nc_ece, cw)):
        widened = res.interval_to_read == "two_sided" and res.two_sided_level > res.level
        assert (f"{100 * res.two_sided_level:.1f}% quantiles (calibrated level)" in summary.interval_method) == widened
    assert ev.classwise_nc_ece.debiased == pytest.approx(cw.debiased, abs=1e-9)  # the interval's centre
    assert ev.classwise_nc_ece.interval_to_read == cw.interval_to_read
    payload = json.loads(ev.to_json())["classwise_nc_ece"]
    assert (payload["interval_method"], payload["interval_to_read"]) == (ev.classwise_nc_ece.interval_method,
                                                                         cw.interval_to_read)
    assert payload["debiased"] == pytest.approx(cw.debiased, abs=1e-9)
    assert f"debiased estimate {cw.debiased:.3f}" in ev.summary()
    # The joint draws differ from fresh item weights (a negative control: the multiplicities were used).
    fresh = posterior_classwise_nc_ece(data.probs, data.responses, reps, usable=usable, seed=ev.seed)
    assert fresh.reported_interval != pytest.approx(cw.reported_interval, abs=1e-6)
    fresh_top = posterior_top_label_nc_ece(data.probs, data.responses, reps, usable=usable, seed=ev.seed)
    assert fresh_top.reported_interval != pytest.approx(top.reported_interval, abs=1e-6)


def test_check_families_of_many_annotators():
    """Families of 70 annotators (the integer key group * 2^J + mask code overflows int64 from J = 63): the
    distinct (group, set of annotators) of the items, each once."""
    from noisycal_bayes.diagnostics.checks import _Families

    rng = np.random.default_rng(0)
    n, J = 60, 70
    item = np.repeat(np.arange(n), 3)
    ann = np.concatenate([rng.choice(J, 3, replace=False) for _ in range(n)])
    ann[:6] = [0, 1, 69, 0, 1, 69]  # items 0 and 1: the same annotators, group 0 both
    groups = np.r_[0, 0, rng.integers(0, 2, n - 2)]
    fam = _Families(item, ann, rng.integers(0, 3, item.size), n, J, 3, groups)
    keys = {(g, tuple(js)) for g, js in zip(fam.group, map(tuple, fam.annotators))}
    want = {(int(groups[i]), tuple(sorted(ann[item == i]))) for i in range(n)}
    assert keys == want and len(fam.members) == len(want)
    assert sorted(np.concatenate(fam.members).tolist()) == list(range(n))
    assert [0, 1] in [m.tolist() for m in fam.members]


def test_check_on_a_sparse_crowd_of_150_annotators_is_not_testable():
    """A sparse crowd (150 annotators, 5 per item): nearly every item is a family of its own, so pooling cells to
    an expected count of 5 leaves one cell per family and no degrees of freedom: ``not_testable`` with that
    reason, never an error, and no verdict from cells the fit expects near-zero counts in."""
    from noisycal_bayes.diagnostics.checks import run_multiclass_checks
    from noisycal_bayes.inference import fit_em_multiclass

    sim = simulate_multiclass(200, 150, 3, labels_per_item=5, seed=0)
    data = _data(sim)
    fit = fit_em_multiclass(data, n_starts=2, seed=0)
    (row,) = run_multiclass_checks(data, fit, method="em", seed=0)
    assert row["status"] == "not_testable" and "after pooling" in row["detail"], row


def _sparse_crowd(n_items=200, n_annotators=150, k=3, seed=0):
    """A crowd of ``n_annotators`` with 3-10 labels each (accuracy 0.8, errors uniform), every item labelled at least
    once: most item-bootstrap replicates miss some annotator's every item."""
    rng = np.random.default_rng(seed)
    sim = simulate_multiclass(n_items, 2, k, seed=seed)  # clean labels and probabilities only
    items = [rng.choice(n_items, rng.integers(3, 11), replace=False) for _ in range(n_annotators)]
    ann = np.concatenate([np.full(it.size, j) for j, it in enumerate(items)])
    item = np.concatenate(items)
    missing = np.setdiff1d(np.arange(n_items), item)
    item, ann = np.concatenate([item, missing]), np.concatenate([ann, rng.integers(0, n_annotators, missing.size)])
    correct = rng.random(item.size) < 0.8
    label = np.where(correct, sim.y[item], (sim.y[item] + rng.integers(1, k, item.size)) % k)
    data = MulticlassAnnotationSet.from_responses(item, ann, label, n_classes=k, probs=sim.probs)
    return data, sim.y


@pytest.mark.slow
def test_em_route_on_a_sparse_crowd_keeps_the_replicates_that_miss_annotators():
    # Regression: with 150 annotators of 3-10 labels every replicate missed some annotator and was dropped ("all 10
    # bootstrap replicates failed"); such a replicate is kept, the absent annotators at the full-sample fit.
    data, y = _sparse_crowd()
    ev = evaluate_multiclass(data, n_boot=10, checks=False)
    assert ev.diagnostics["n_boot_failed"] == 0
    assert np.isfinite([ev.nc_ece.lower, ev.nc_ece.upper]).all() and ev.nc_ece.lower <= ev.nc_ece.upper
    assert np.isfinite([ev.classwise_nc_ece.lower, ev.classwise_nc_ece.upper]).all()
    assert np.all(np.isfinite(ev.confusion_lower)) and np.all(ev.confusion_lower <= ev.confusion_upper)


def test_nuts_route_and_its_check_on_a_sparse_crowd():  # ~10 s: evaluate's IBCC route in make test
    # Regression: the check's family keys group * 2^J overflowed (OverflowError from J = 63 annotators on).
    data, y = _sparse_crowd()
    ev = evaluate_multiclass(data, method="nuts", n_chains=1, n_warmup=100, n_draws=100)
    assert ev.fit.model == "ibcc" and "IBCC" in ev.method_detail  # a crowd: IBCC with the pooled EM's population
    assert np.isfinite([ev.nc_ece.lower, ev.nc_ece.upper]).all() and ev.nc_ece.lower <= ev.nc_ece.upper
    assert ev.checks[0]["status"] in ("pass", "warn", "not_testable")
    assert "could not run" not in ev.checks[0]["detail"]


# The NUTS case is in make test-all: the same engine's NUTS route on repeated labels stays in make test
# (tests/test_crowd_evaluation.py, K = 2).
@pytest.mark.parametrize("method, opts", [("em", dict(n_boot=10)),
                                          pytest.param("nuts", dict(n_chains=1, n_warmup=100, n_draws=100),
                                                       marks=pytest.mark.slow)])
def test_both_routes_run_on_repeated_labels(method, opts, tmp_path):
    """K = 3 with repeated (item, annotator) labels: each is one more response, on both routes and in the
    naive targets; the majority-vote ECE is checked against votes counted from the triples by hand."""
    sim = simulate_multiclass(200, 5, 3, labels_per_item=3, repeat_rate=0.2, seed=6)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, probs=sim.probs)
    assert data.has_repeats
    ev = evaluate(data, method=method, bins=5, seed=0, **opts)
    assert np.isfinite(ev.nc_ece.value) and ev.nc_ece.lower <= ev.nc_ece.upper
    votes = np.zeros((data.n_items, 3))
    for i, c in zip(sim.item, sim.label):
        votes[i, c] += 1
    payload = json.loads(ev.to_json())
    assert payload["n_items"] == 200
    ev.write_report(tmp_path / "rep")
    want = top_label_ece(data.probs, np.eye(3)[votes.argmax(axis=1)], bins=5).value
    naive = ev.naive.set_index("target")
    assert naive.loc["majority_vote", "top_label_ece"] == pytest.approx(want, abs=1e-12)


def test_check_refits_are_warm_started_on_the_replicates_distinct_cells(monkeypatch):
    """Every parametric-bootstrap refit of the EM check starts at the fit alone (``init``, no random start) and
    fits the replicate's distinct cells weighted by their counts (not its items): the refits are cheap."""
    import noisycal_bayes.inference as inference
    from noisycal_bayes.core import score_groups
    from noisycal_bayes.diagnostics.checks import N_CHECK_REPLICATES, run_multiclass_checks

    sim = simulate_multiclass(1000, 3, 3, accuracy=0.8, seed=4)
    data = _data(sim)
    fit = inference.fit_em_multiclass(data, groups=score_groups(data.probs), n_starts=1, seed=0)
    calls = []
    real = inference.fit_em_multiclass

    def counting(rep, **kw):
        calls.append((rep.n_items, kw))
        return real(rep, **kw)

    monkeypatch.setattr(inference, "fit_em_multiclass", counting)
    (row,) = run_multiclass_checks(data, fit, method="em", seed=0)
    assert row["status"] in ("pass", "warn") and "pooled cells" in row["detail"], row
    assert len(calls) == N_CHECK_REPLICATES
    # 6 families x 27 patterns: at most 162 cells (padded to one size with weight-0 ones) instead of 1000 items.
    assert len({n for n, _ in calls}) == 1 and all(n < 300 and kw["n_starts"] == 0 and isinstance(kw["init"], tuple) and kw["weights"] is not None
               for n, kw in calls)
    np.testing.assert_allclose(calls[0][1]["init"][0], fit.confusion)


def _sparse_k_crowd(K=3, J=80, n_items=400, lo=5, hi=20, seed=7):
    """A sparse K-class crowd: annotator rows drawn around a population (diagonal 0.7), 5-20 labels each, and
    calibrated class probabilities from a softmax of the clean class's logit advantage."""
    rng = np.random.default_rng(seed)
    m = np.full((K, K), 0.3 / (K - 1))
    np.fill_diagonal(m, 0.7)
    C = np.stack([[rng.dirichlet(8.0 * m[y]) for y in range(K)] for _ in range(J)])
    y = rng.integers(0, K, n_items)
    counts = [rng.integers(lo, hi + 1) for _ in range(J)]
    item = np.concatenate([rng.choice(n_items, c, replace=False) for c in counts])
    ann = np.repeat(np.arange(J), counts)
    u = rng.random(item.size)
    label = (np.cumsum(C[ann, y[item]], axis=1) < u[:, None]).sum(axis=1).clip(0, K - 1)
    logits = 2.0 * np.eye(K)[y] + rng.normal(size=(n_items, K))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    kept, item = np.unique(item, return_inverse=True)  # the items somebody labelled
    return MulticlassAnnotationSet.from_responses(item, ann, label, n_classes=K, probs=probs[kept])


def test_em_route_on_a_sparse_crowd_fits_the_pooled_model_and_keeps_every_annotator():
    """A crowd (more than 12 annotators, a handful of labels each) on the EM route: the partially pooled
    Dawid-Skene, refitted on the replicates; no annotator's confusion matrix is left near singular and no item is
    left out of the estimate. Negative control: the grouped maximum-likelihood EM on the same data (``groups`` set) loses
    annotators to near-singular matrices."""
    data = _sparse_k_crowd()
    ev = evaluate_multiclass(data, method="em", n_boot=8, checks=False, seed=0)
    assert ev.fit.model == "pooled" and "partially pooled" in ev.method_detail
    assert ev.usable.all()
    # the estimate uses every item (a replicate's refit may still lose one: said inside the replicates' count)
    assert not any("left out" in w and "bootstrap replicates" not in w for w in ev.warnings)
    assert ev.nc_ece.lower <= ev.nc_ece.upper and np.isfinite(ev.nc_ece.value)
    grouped = evaluate_multiclass(data, method="em", groups=2, n_boot=0, checks=False, seed=0)
    assert grouped.fit.model == "grouped" and not grouped.usable.all()


def test_a_plug_in_value_below_the_draws_interval_gets_a_note():
    """The plug-in NC-ECE at the point channels below the draws' interval (adult's IBCC fit in the real-data matrix:
    0.119 against [0.128, 0.230]) is said in a note; above it (the debiasing at work) and inside it say nothing."""
    from types import SimpleNamespace as NS

    from noisycal_bayes.evaluation.engines import Settings, _nc_ece_summary

    post = NS(debiased=0.15, lower=0.128, upper=0.23, interval_to_read="two_sided", upper_one_sided=0.22,
              interval_method="debiased", target="sample", calibration_p_value=0.0)
    s = Settings(level=0.9)
    _, notes = _nc_ece_summary(0.119, post, s, None, "how")
    assert len(notes) == 1 and "lies below the 90% interval [0.128, 0.230]" in notes[0]
    assert _nc_ece_summary(0.24, post, s, None, "how")[1] == []
    assert _nc_ece_summary(0.15, post, s, None, "how")[1] == []
