"""K-class out-of-core statistics: every source (in memory, chunks, CSV / Parquet, Dask long / wide, a pickled
file) gives the counts of an independent count of the items (pandas ``groupby`` over the dense labels), and
``fit_em`` on the statistics equals ``fit_em`` on the items: identical on the patterns path (the same (group x
pattern) grid reaches the same compiled EM), to rounding on the sparse path (rows weighted by their counts).
K = 2 through the K-class path is the binary statistics row for row (the base-3 keys coincide)."""
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")  # the `dask` extra (installed by `dev`)
dd = pytest.importorskip("dask.dataframe")

import noisycal_bayes as nb
from noisycal_bayes import AnnotationSet, Channel, MulticlassAnnotationSet
from noisycal_bayes.core import score_groups
from noisycal_bayes.data import (SufficientStats, read_stats_csv, read_stats_parquet, stats_from_chunks,
                                 stats_from_dask)
from noisycal_bayes.data.outofcore import MulticlassSufficientStats
from noisycal_bayes.simulate import simulate_annotations, simulate_multiclass

#: The patterns path runs the same compiled EM on the same grid: the fits are identical; 1e-9 is the brief's bar.
SAME = 1e-9
#: Two EMs at K = 2 through different kernels, each stopped by tol = 1e-11 (tests/equivalence/test_k2.py).
FIXED_POINT = 1e-6


def _case(n_classes, n_annotators, n_items, labels_per_item, names, seed):
    sim = simulate_multiclass(n_items, n_annotators, n_classes, labels_per_item=labels_per_item, seed=seed)
    data = MulticlassAnnotationSet.from_responses(sim.item, sim.annotator, sim.label, n_classes=n_classes,
                                                  classes=names, probs=sim.probs,
                                                  item_ids=np.arange(100, 100 + n_items),
                                                  annotator_ids=[f"w{j}" for j in range(n_annotators)])
    group = score_groups(data.probs)
    return data, group


@pytest.fixture(scope="module", params=[3, 10], ids=["K=3", "K=10"])
def case(request):
    """K = 3 (class names, 5 annotators, 4 labels per item) or K = 10 (integer classes, 3 annotators, all label)."""
    if request.param == 3:
        return _case(3, 5, 3000, 4, ["cat", "dog", "owl"], seed=1)
    return _case(10, 3, 3000, None, None, seed=2)


def _long(data, group):
    out = data.to_long()
    out["group"] = group[out["item"].to_numpy().astype(np.int64) - 100]
    return out.astype({"item": np.int64})


def _wide(data, group):
    lab = np.asarray(data.classes, dtype=object)[np.maximum(data.labels, 0)]
    lab[data.labels < 0] = None
    out = pd.DataFrame(lab, columns=list(data.annotator_ids))
    out.insert(0, "item", data.item_ids.astype(np.int64))
    out["group"] = group
    return out


def _independent_counts(data, group) -> pd.DataFrame:
    """(group, pattern) counts by pandas over the dense labels: no key arithmetic."""
    frame = pd.DataFrame(data.labels, columns=list(data.annotator_ids))
    frame.insert(0, "group", group)
    return frame.value_counts().rename("count").reset_index()


def _as_table(stats) -> pd.DataFrame:
    return stats.to_frame()


def _assert_counts(stats, data, group):
    ref = _independent_counts(data, group)
    cols = ["group"] + list(data.annotator_ids)
    got = _as_table(stats).sort_values(cols).reset_index(drop=True)
    ref = ref.sort_values(cols).reset_index(drop=True)
    np.testing.assert_array_equal(got[cols].to_numpy(), ref[cols].to_numpy())
    np.testing.assert_array_equal(got["count"].to_numpy(), ref["count"].to_numpy())
    assert (stats.n_items, stats.n_responses, stats.classes) == (data.n_items, data.n_responses, data.classes)


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def _assert_same_fit(a, b, tol=SAME):
    np.testing.assert_allclose(a.confusion, b.confusion, rtol=0, atol=tol)
    np.testing.assert_allclose(a.prevalence, b.prevalence, rtol=0, atol=tol)
    assert a.log_likelihood == pytest.approx(b.log_likelihood, rel=tol, abs=tol)
    assert (a.path, a.n_groups, a.converged) == (b.path, b.n_groups, b.converged)


# ---------------------------------------------------------------------------------------- counts, every source
def test_in_memory_statistics_are_the_counts(case):
    data, group = case
    stats = SufficientStats.from_annotations(data)  # default groups: the K-class fit's score_groups(probs)
    _assert_counts(stats, data, group)
    assert stats.kind == "multiclass" and stats.n_classes == data.n_classes and stats.n_groups == 2 * data.n_classes
    assert stats.edges is None and stats.score_sum is None and stats.patterns.dtype == np.int16
    given = SufficientStats.from_annotations(data, groups=np.zeros(data.n_items, np.int64))
    _assert_counts(given, data, np.zeros(data.n_items, np.int64))


def test_chunks_csv_parquet_dask_and_a_pickled_file_equal_in_memory(case, tmp_path):
    data, group = case
    ref = SufficientStats.from_annotations(data, groups=group)
    long, wide = _long(data, group), _wide(data, group)
    kw = dict(classes=data.classes, group="group")
    got = {
        "chunks long": stats_from_chunks([long.iloc[k:k + 997] for k in range(0, len(long), 997)], layout="long", **kw),
        "chunks wide": stats_from_chunks([wide.iloc[k:k + 701] for k in range(0, len(wide), 701)], **kw),
    }
    long.to_csv(tmp_path / "long.csv", index=False)
    got["csv long"] = read_stats_csv(tmp_path / "long.csv", layout="long", chunksize=1234, **kw)
    wide.to_parquet(tmp_path / "wide.parquet", index=False)
    got["parquet wide"] = read_stats_parquet(tmp_path / "wide.parquet", batch_size=999, **kw)
    with dask.config.set(scheduler="synchronous"):
        shuffled = long.sample(frac=1.0, random_state=0).reset_index(drop=True)
        got["dask long"] = stats_from_dask(dd.from_pandas(shuffled, npartitions=4), split_out=3, **kw)
        got["dask wide"] = stats_from_dask(dd.from_pandas(wide, npartitions=3), layout="wide", **kw)
    with open(tmp_path / "stats.pkl", "wb") as handle:
        pickle.dump(ref, handle)
    with open(tmp_path / "stats.pkl", "rb") as handle:
        got["pickled file"] = pickle.load(handle)
    for name, stats in got.items():
        assert stats.same_as(ref), name
    _assert_counts(ref, data, group)


def test_merge_adds_pieces_in_any_order(case):
    data, group = case
    ref = SufficientStats.from_annotations(data, groups=group)
    cut = [np.arange(0, 1000), np.arange(1000, 2200), np.arange(2200, data.n_items)]
    pieces = [SufficientStats.from_annotations(data.subset(c), groups=group[c]) for c in cut]
    assert (pieces[0] + pieces[1] + pieces[2]).same_as(ref)
    assert pieces[2].merge(pieces[0], pieces[1]).same_as(ref)


# ---------------------------------------------------------------------------------------- fits
def test_fit_em_from_statistics_equals_fit_em_from_items(case):
    data, group = case
    stats = SufficientStats.from_annotations(data)
    for model in ("grouped", "dawid_skene"):
        ref = _quiet(nb.fit_em, data, model=model)
        fit = _quiet(nb.fit_em, stats, model=model)
        assert fit.path == "patterns"
        _assert_same_fit(fit, ref)
        assert fit.n_iter == ref.n_iter and fit.selected_start == ref.selected_start
        np.testing.assert_array_equal(fit.n_labels, ref.n_labels)
    # Out-of-core statistics with the group column: the in-memory fit with the same groups.
    chunks = stats_from_chunks([_long(data, group)], layout="long", classes=data.classes, group="group")
    _assert_same_fit(_quiet(nb.fit_em, chunks, n_starts=2, seed=3), _quiet(nb.fit_em, data, groups=group, n_starts=2,
                                                                           seed=3))


def test_sparse_design_fits_the_weighted_rows():
    # (K + 1)^J = 4^8 possible patterns > 2,000 items: both take the sparse path; the statistics' rows carry their
    # counts as item weights (the same sums in another order).
    data, group = _case(3, 8, 2000, 5, None, seed=4)
    stats = SufficientStats.from_annotations(data)
    ref = _quiet(nb.fit_em, data)
    fit = _quiet(nb.fit_em_multiclass, stats)
    assert fit.path == ref.path == "sparse"
    _assert_same_fit(fit, ref)


def test_k2_through_the_class_path_is_the_binary_statistics():
    sim = simulate_annotations(3000, fpr=[0.1, 0.25, 0.15, 0.2], tpr=[0.85, 0.7, 0.9, 0.8], missing=0.2, seed=5)
    binary = sim.data
    two = MulticlassAnnotationSet.from_responses(*binary.responses, n_classes=2, annotator_ids=binary.annotator_ids,
                                                 item_ids=binary.item_ids)
    stats2, bin_stats = SufficientStats.from_annotations(two), SufficientStats.from_annotations(binary)
    # The base-3 keys coincide: the same rows in the same order.
    np.testing.assert_array_equal(stats2.patterns, bin_stats.patterns)
    np.testing.assert_array_equal(stats2.counts, bin_stats.counts)
    assert stats2.to_binary().same_as(bin_stats)
    long = binary.to_long()
    assert stats_from_chunks([long], layout="long", classes=[0, 1]).to_binary().same_as(
        stats_from_chunks([long], layout="long", score=None))
    # The binary door refuses two-class statistics as it refuses the two-class set, naming the binary view.
    with pytest.raises(ValueError, match=r"fit_em is defined for two classes.*to_binary\(\)"):
        nb.fit_em(stats2)
    kw = dict(model="dawid_skene", tol=1e-11, max_iter=5000)
    ref = _quiet(nb.fit_em, bin_stats, **kw)
    fit = _quiet(nb.fit_em_multiclass, stats2, **kw)
    ch = Channel.from_confusion(fit.confusion)
    np.testing.assert_allclose(ch.fpr, ref.channel.fpr, atol=FIXED_POINT)
    np.testing.assert_allclose(ch.tpr, ref.channel.tpr, atol=FIXED_POINT)
    assert fit.log_likelihood == pytest.approx(ref.loglik, abs=FIXED_POINT)


def test_binary_pickles_keep_their_state_and_k_class_ones_restore():
    import dataclasses

    sim = simulate_annotations(300, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=0)
    stats = SufficientStats.from_annotations(sim.data, bins=nb.Binning.equal_width(4))
    # The binary fields (the pickled state and the goldens' view) are those of earlier versions.
    old = ["patterns", "group", "counts", "annotator_ids", "edges", "n_items", "n_responses", "score_sum",
           "row_score_sum", "row_score_sq"]
    assert [f.name for f in dataclasses.fields(stats)] == old and sorted(vars(stats)) == sorted(old)
    back = pickle.loads(pickle.dumps(stats))
    assert back.same_as(stats) and type(back) is SufficientStats and back.classes is None and back.kind == "binary"
    data, _ = _case(3, 3, 200, None, ["a", "b", "c"], seed=0)
    k = SufficientStats.from_annotations(data)
    assert isinstance(k, SufficientStats) and type(k) is MulticlassSufficientStats
    assert type(k).__module__ == "noisycal_bayes.data.outofcore"
    assert pickle.loads(pickle.dumps(k)).same_as(k) and not k.same_as(stats)


# ---------------------------------------------------------------------------------------- bad input
def test_bad_inputs_name_the_offending_entries():
    data, group = _case(3, 3, 300, None, ["a", "b", "c"], seed=0)
    long = _long(data, group)
    kw = dict(layout="long", classes=data.classes)
    # Statistics of different classes (K = 3 and K = 4, or binary) do not merge.
    other, _ = _case(4, 3, 300, None, None, seed=0)
    k3, k4 = SufficientStats.from_annotations(data), SufficientStats.from_annotations(other)
    with pytest.raises(ValueError, match=r"different classes: piece 0 \['a', 'b', 'c'\], piece 1 \[0, 1, 2, 3\]"):
        k3.merge(k4)
    with pytest.raises(ValueError, match=r"piece 1 binary \(0/1\)"):
        k3 + SufficientStats.from_annotations(simulate_annotations(50, fpr=[0.1] * 3, tpr=[0.9] * 3, seed=0).data)
    # A label outside the classes, in long and in wide layout.
    bad = long.copy()
    bad.loc[[4, 7], "label"] = "emu"
    with pytest.raises(ValueError, match=r"`label` holds \['emu'\], which are not among the classes \['a', 'b', 'c'\], at "
                                         r"\(item, annotator\) \[\(101, 'w1'\), \(102, 'w1'\)\]"):
        stats_from_chunks([bad], **kw)
    wide = _wide(data, group)
    wide.loc[3, "w2"] = "emu"
    with pytest.raises(ValueError, match=r"\['emu'\].*column 'w2', items \[103\]"):
        stats_from_chunks([wide], classes=data.classes, group="group")
    # Group labels: not whole numbers >= 0, or two groups for one item.
    bad = long.astype({"group": np.float64})
    bad.loc[bad["item"] == 105, "group"] = 1.5
    with pytest.raises(ValueError, match=r"`group` must hold whole numbers >= 0.*\[1.5\] at items \[105, 105, 105\]"):
        stats_from_chunks([bad], group="group", **kw)
    bad = long.copy()
    bad.loc[bad.index[bad["item"] == 106][0], "group"] = 5
    with pytest.raises(ValueError, match=r"items \[106\] have more than one group"):
        stats_from_chunks([bad], group="group", **kw)
    # Options that belong to the other kind.
    with pytest.raises(ValueError, match="not per score bin: drop `bins`"):
        stats_from_chunks([long], bins=[0, 0.5, 1], **kw)
    with pytest.raises(ValueError, match=r"`group` .* is for K-class statistics \(`classes=`\)"):
        stats_from_chunks([long], layout="long", group="group")
    with pytest.raises(ValueError, match="`groups` are for K-class data"):
        SufficientStats.from_annotations(simulate_annotations(50, fpr=[0.1] * 3, tpr=[0.9] * 3, seed=0).data,
                                         groups=np.zeros(50, np.int64))
    # More patterns than int64 keys: the in-memory route is named.
    big = MulticlassAnnotationSet.from_responses(np.repeat(np.arange(4), 20), np.tile(np.arange(20), 4),
                                                 np.arange(80) % 10, n_classes=10)
    with pytest.raises(ValueError, match=r"11\*\*20 pattern keys.*fit them in memory \(fit_em, sparse path\)"):
        SufficientStats.from_annotations(big)
    with pytest.raises(ValueError, match=r"rows \[1\] hold \[3\]"):
        MulticlassSufficientStats(np.array([[0, 1], [3, 0]]), np.zeros(2), np.ones(2), ("x", "y"),
                                  classes=("a", "b", "c"))
    with pytest.raises(ValueError, match="need `classes`"):
        MulticlassSufficientStats(np.array([[0, 1]]), np.zeros(1), np.ones(1), ("x", "y"))


def test_fits_refuse_what_statistics_cannot_give():
    data, group = _case(3, 3, 300, None, None, seed=0)
    stats = SufficientStats.from_annotations(data)
    with pytest.raises(ValueError, match="the groups are those the statistics were counted in"):
        nb.fit_em(stats, groups=group)
    with pytest.raises(ValueError, match="model='pooled' reads the responses"):
        nb.fit_em_multiclass(stats, model="pooled")
    with pytest.raises(ValueError, match="fit_map_multiclass needs the MulticlassAnnotationSet"):
        nb.fit_map(stats)
    with pytest.raises(ValueError, match="weigh their .* rows by their counts"):
        nb.fit_em_multiclass(stats, weights=np.ones(stats.n_patterns))
    binary = SufficientStats.from_annotations(simulate_annotations(50, fpr=[0.1] * 3, tpr=[0.9] * 3, seed=0).data)
    with pytest.raises(ValueError, match="these SufficientStats are binary"):
        nb.fit_em_multiclass(binary)
    with pytest.raises(ValueError, match=r"posterior_nc_ece is defined for two classes"):
        nb.posterior_nc_ece(stats, _quiet(nb.fit_em, stats))
