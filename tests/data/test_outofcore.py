"""Out-of-core sufficient statistics: every path (Dask long / wide, chunked CSV / Parquet, merge) gives exactly
the counts of the in-memory compression (`compress_patterns` on an AnnotationSet, an independent code path),
and fits from the statistics equal fits from the AnnotationSet."""
import itertools
import warnings

import numpy as np
import pandas as pd
import pytest

dask = pytest.importorskip("dask")  # the `dask` extra (installed by `dev`)
dd = pytest.importorskip("dask.dataframe")

from noisycal_bayes import AnnotationSet, Binning
from noisycal_bayes.data import (SufficientStats, read_stats_csv, read_stats_parquet, stats_from_chunks,
                                 stats_from_dask)
from noisycal_bayes.simulate import simulate_annotations

BINS = Binning.equal_width(6)


@pytest.fixture(scope="module")
def data():
    """2,000 items, 4 annotators with ~25% missing responses (annotator 0 always present), scores in [0, 1]."""
    sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.15, 0.3], tpr=[0.9, 0.8, 0.7, 0.85], seed=3)
    lab = sim.data.labels.astype(np.float64)
    miss = np.random.default_rng(0).random(lab.shape) < 0.25
    miss[:, 0] = False
    lab[miss] = np.nan
    frame = pd.DataFrame(lab, columns=[10, 11, 12, 13], index=pd.Index(np.arange(5, 2005), name="item"))
    return AnnotationSet.from_wide(frame, pd.Series(sim.data.scores, index=frame.index))


def _long(data, *, shuffle=False):
    out = data.to_long().astype({"item": np.int64, "annotator": np.int64})
    return out.sample(frac=1.0, random_state=1).reset_index(drop=True) if shuffle else out


def _wide(data):
    out = pd.DataFrame(np.where(data.labels < 0, np.nan, data.labels), columns=[f"a{j}" for j in range(4)])
    out.insert(0, "item", data.item_ids.astype(np.int64))
    out["score"] = data.scores
    return out


def _wide_reference(data):
    w = _wide(data)
    return AnnotationSet.from_wide(w.set_index("item")[[f"a{j}" for j in range(4)]], data.scores)


def _sync():
    return dask.config.set(scheduler="synchronous")


def test_hand_computed_codes():
    # Items: 1 -> (a=1, b=missing) in bin 1; 2 -> (a=0, b=1) in bin 0; 3 -> (a=0, b=1) in bin 0.
    frame = pd.DataFrame({"item": [1, 2, 2, 3, 3], "annotator": ["a", "a", "b", "b", "a"], "label": [1, 0, 1, 1, 0],
                          "score": [0.9, 0.1, 0.1, 0.3, 0.3]})
    st = stats_from_chunks([frame], layout="long", bins=[0.0, 0.5, 1.0])
    assert st.annotator_ids == ("a", "b")
    assert st.patterns.tolist() == [[0, 1], [1, -1]] and st.group.tolist() == [0, 1] and st.counts.tolist() == [2, 1]
    assert (st.n_items, st.n_responses) == (3, 5)
    np.testing.assert_allclose(st.score_sum, [0.4, 0.9])
    np.testing.assert_array_equal(st.bin_counts, [2, 1])
    # Row moments: row (bin 0, a=0 b=1) holds items 2 and 3 (scores 0.1, 0.3); row (bin 1, a=1) item 1 (0.9).
    np.testing.assert_allclose(st.row_score_sum, [0.4, 0.9])
    np.testing.assert_allclose(st.row_score_sq, [0.1**2 + 0.3**2, 0.81])
    assert list(st.to_frame().columns) == ["bin", "a", "b", "count", "score_sum", "score_sq"]


@pytest.mark.parametrize("with_scores", [True, False])
def test_dask_long_equals_in_memory(data, with_scores):
    bins = BINS if with_scores else None
    ref = SufficientStats.from_annotations(data, bins)
    long = _long(data, shuffle=True)  # responses of one item spread over partitions
    if not with_scores:
        long = long.drop(columns="score")
    ddf = dd.from_pandas(long, npartitions=7)
    with _sync():
        st = stats_from_dask(ddf, bins=bins, split_out=3)
    assert st.same_as(ref), (st, ref)  # same_as compares the row moments too
    assert st.n_responses == int(data.observed.sum())
    assert st.has_row_moments == ref.has_row_moments == with_scores


def test_dask_wide_equals_in_memory(data):
    ref = SufficientStats.from_annotations(_wide_reference(data), BINS)
    with _sync():
        st = stats_from_dask(dd.from_pandas(_wide(data), npartitions=5), layout="wide", bins=BINS)
    assert st.same_as(ref)


def test_dask_distributed_cluster(data):
    distributed = pytest.importorskip("distributed")
    ref = SufficientStats.from_annotations(data, BINS)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl):
        st = stats_from_dask(dd.from_pandas(_long(data, shuffle=True), npartitions=4), bins=BINS,
                             annotators=[10, 11, 12, 13])
    assert st.same_as(ref)


def test_chunked_csv_and_parquet_equal_in_memory(data, tmp_path):
    _check_file_readers(data, tmp_path, BINS)


def _check_file_readers(data, tmp_path, bins):
    """CSV and Parquet, long and wide, read in chunks that cut items in the middle of their responses, give
    the in-memory statistics of the same items."""
    ref_long = SufficientStats.from_annotations(data, bins)
    ref_wide = SufficientStats.from_annotations(_wide_reference(data), bins)
    long, wide = _long(data), _wide(data)
    long.to_csv(tmp_path / "long.csv", index=False)
    wide.to_csv(tmp_path / "wide.csv", index=False)
    long.to_parquet(tmp_path / "long.parquet", row_group_size=333)
    wide.to_parquet(tmp_path / "wide.parquet", row_group_size=250)
    assert read_stats_csv(tmp_path / "long.csv", layout="long", bins=bins, chunksize=777).same_as(ref_long)
    assert read_stats_parquet(tmp_path / "long.parquet", layout="long", bins=bins, batch_size=101).same_as(ref_long)
    assert read_stats_csv(tmp_path / "wide.csv", bins=bins, chunksize=300).same_as(ref_wide)
    assert read_stats_parquet(tmp_path / "wide.parquet", bins=bins, batch_size=128).same_as(ref_wide)
    return ref_long, ref_wide


def test_equal_mass_bins_out_of_core_equal_in_memory(data, tmp_path):
    # Equal-mass bins need every item's score first: the file readers and Dask read them in a first pass and
    # must give the edges (and so the counts) of the same items in memory, whose edges come from
    # Binning.edges_for on the AnnotationSet's scores (an independent path: no chunks, no deduplication).
    eq = Binning.equal_mass(7)
    # Chunks that cut items in the middle of their responses: each item's score must be counted once.
    ref_long, ref_wide = _check_file_readers(data, tmp_path, eq)
    np.testing.assert_array_equal(ref_long.edges, eq.edges_for(data.scores))
    assert ref_long.n_bins == 7 and np.ptp(ref_long.bin_counts) <= 1  # 2000 distinct scores: 285 or 286 per bin
    with _sync():
        assert stats_from_dask(dd.from_pandas(_long(data, shuffle=True), npartitions=4), bins=eq).same_as(ref_long)
        assert stats_from_dask(dd.from_pandas(_wide(data), npartitions=3), layout="wide", bins=eq).same_as(ref_wide)


def test_merge_is_order_independent_and_aligns_annotators(data):
    ref = SufficientStats.from_annotations(data, BINS)
    long = _long(data)
    cuts = [0, 500, 1200, 1700, data.n_items]
    # Pieces by item; the first piece without annotator 13, so the pieces have different annotator sets.
    pieces = []
    for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        part = long[long["item"].isin(data.item_ids[a:b].astype(np.int64))]
        if k == 0:
            part = part[part["annotator"] != 13]
        pieces.append(stats_from_chunks([part], layout="long", bins=BINS))
    assert pieces[0].annotator_ids == (10, 11, 12)
    whole = long[~(long["item"].isin(data.item_ids[:500].astype(np.int64)) & (long["annotator"] == 13))]
    ref = SufficientStats.from_annotations(AnnotationSet.from_long(whole), BINS)
    results = [p[0].merge(*p[1:]) for p in itertools.permutations(pieces)]
    assert all(r.same_as(ref) for r in results)
    # The moments are those of the in-memory compression (independent: np.bincount over items per row).
    merged = results[0]
    np.testing.assert_allclose(merged.row_score_sum, ref.row_score_sum, rtol=1e-12)
    np.testing.assert_allclose(merged.row_score_sq, ref.row_score_sq, rtol=1e-12)
    # Associativity: (a + b) + (c + d) == a + (b + (c + d)).
    a, b, c, d = pieces
    assert ((a + b) + (c + d)).same_as(a + (b + (c + d)))


def test_fit_em_from_stats_equals_fit_from_annotations(data):
    from noisycal_bayes import fit_em

    st = SufficientStats.from_annotations(data, BINS)
    with _sync():
        st_dask = stats_from_dask(dd.from_pandas(_long(data, shuffle=True), npartitions=4), bins=BINS)
    for model in ("grouped", "dawid_skene", "histogram"):
        ref = fit_em(data, model=model, groups=BINS, n_starts=4)
        for s in (st, st_dask):
            fit = fit_em(s, model=model, groups=None, n_starts=4)
            np.testing.assert_array_equal(fit.inputs.patterns, ref.inputs.patterns)
            np.testing.assert_array_equal(fit.inputs.counts, ref.inputs.counts)
            np.testing.assert_allclose(fit.channel.fpr, ref.channel.fpr, rtol=0, atol=1e-12)
            np.testing.assert_allclose(fit.channel.tpr, ref.channel.tpr, rtol=0, atol=1e-12)
            np.testing.assert_allclose(fit.prevalence, ref.prevalence, rtol=0, atol=1e-12)
            assert fit.loglik == pytest.approx(ref.loglik, rel=1e-13)
            np.testing.assert_array_equal(fit.groups.used, ref.groups.used)


@pytest.mark.slow  # 13-25 s cold (a NUTS compile and three propagation routes); make test-all runs it
def test_fit_nuts_from_stats_gives_identical_draws(data):
    from noisycal_bayes import fit_nuts

    st = SufficientStats.from_annotations(data, BINS)
    kw = dict(n_chains=1, n_warmup=100, n_draws=100, progress_bar=False, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = fit_nuts(data, groups=BINS, **kw)
        fit = fit_nuts(st, groups=None, **kw)
    for k in ref.draws:
        np.testing.assert_array_equal(fit.draws[k], ref.draws[k])
    # No items: item-level outputs raise; the ArviZ export has no observed data or log-likelihood.
    with pytest.raises(ValueError, match="SufficientStats"):
        fit.clean_label_probability()
    with pytest.raises(ValueError, match="SufficientStats"):
        fit.log_likelihood(per="item")
    with pytest.raises(ValueError, match="SufficientStats"):
        fit.to_arviz(log_likelihood=True)
    assert fit.log_likelihood(per="row").shape[:2] == (1, 100)
    # Propagation: the plug-in route needs only the channels (same draws -> same answer); the per-item
    # routes say why they cannot work instead of failing on a missing index.
    from noisycal_bayes import posterior_nc_ece

    a = posterior_nc_ece(data, fit, bins=BINS, seed=0)
    b = posterior_nc_ece(data, ref, bins=BINS, seed=0)
    np.testing.assert_array_equal(a.draws, b.draws)
    for method in ("model", "latent"):
        with pytest.raises(ValueError, match="keep no items"):
            posterior_nc_ece(data, fit, bins=BINS, method=method)
        # ... and from the statistics themselves every route gives the in-memory answer.
        a = posterior_nc_ece(st, fit, method=method, seed=1)
        b = posterior_nc_ece(data, ref, bins=BINS, method=method, seed=1)
        np.testing.assert_array_equal(a.draws, b.draws)
    idata = fit.to_arviz()
    assert "log_likelihood" not in list(getattr(idata, "groups", lambda: [])() if callable(getattr(idata, "groups", None))
                                        else idata.groups)


def test_fit_from_stats_refuses_what_it_cannot_do(data):
    from noisycal_bayes import fit_em, fit_map, fit_nuts

    st = SufficientStats.from_annotations(data, BINS)
    with pytest.raises(ValueError, match="bins the statistics were computed with"):
        fit_em(st, groups=Binning.equal_mass(5))
    with pytest.raises(ValueError, match="bins the statistics were computed with"):
        fit_em(st, groups=Binning.equal_width(3))
    fit_em(st, groups=Binning.equal_width(6), n_starts=2)  # the same bins are accepted
    with pytest.raises(ValueError, match="platt"):
        fit_map(st, model="platt")
    with pytest.raises(ValueError, match="compress=True"):
        fit_nuts(st, groups=None, compress=False)
    no_scores = SufficientStats.from_annotations(data)
    with pytest.raises(ValueError, match="without scores"):
        fit_em(no_scores, groups=None)
    assert fit_em(no_scores, model="dawid_skene", n_starts=2).converged


def _expect(match, fn, *args, **kw):
    with pytest.raises(ValueError, match=match):
        with _sync():
            fn(*args, **kw)


def test_bad_inputs_name_the_offending_entries(data, tmp_path):
    long = _long(data)
    bad = long.copy()
    bad.loc[3, "label"] = 2
    _expect(r"labels must be 0 or 1; got \[2\] at \(item, annotator\) \[\(6, ", stats_from_chunks, [bad], layout="long")
    _expect(r"labels must be 0 or 1", stats_from_dask, dd.from_pandas(bad, npartitions=3))
    bad = long.copy()
    bad.loc[bad["item"] == 7, "score"] = 1.5
    _expect(r"\[0, 1\]; got \[1.5, .*at items \[7", stats_from_dask, dd.from_pandas(bad, npartitions=3), bins=BINS)
    # Two scores for one item, with its rows in different partitions.
    bad = long.copy()
    bad.loc[bad.index[bad["item"] == 8][0], "score"] = 0.0
    _expect(r"items \[8\] have more than one score", stats_from_dask, dd.from_pandas(bad.iloc[::-1], npartitions=4),
            bins=BINS)
    # A duplicate (item, annotator) pair whose two rows sit in different partitions.
    dup = pd.concat([long, long[(long["item"] == 9) & (long["annotator"] == 10)]], ignore_index=True)
    _expect(r"items \[9\] have more than one label from the same annotator", stats_from_dask,
            dd.from_pandas(dup, npartitions=5))
    _expect(r"items \[9\] have more than one label", stats_from_chunks, [dup.sort_values("item", kind="stable")],
            layout="long")
    _expect(r"sorted by item.*stats_from_dask", stats_from_chunks, [long.iloc[10:], long.iloc[:10]], layout="long")
    _expect(r"sorted by item", stats_from_chunks, [long.iloc[::-1]], layout="long")
    _expect("equal-mass bins.*one pass", stats_from_chunks, [long], layout="long", bins=Binning.equal_mass(5))
    bad = _wide(data)
    bad.loc[5, "score"] = np.nan
    bad.to_csv(tmp_path / "nan_score.csv", index=False)
    _expect(r"nan_score.csv: equal-mass bins", read_stats_csv, tmp_path / "nan_score.csv", bins=Binning.equal_mass(5))
    _expect(r"equal-mass bins.*no_such_column", read_stats_csv, tmp_path / "nan_score.csv", bins=Binning.equal_mass(5),
            score="no_such_column")
    _expect("int 5", stats_from_chunks, [long], layout="long", bins=5)
    _expect(r"missing column\(s\) \['label'\]", stats_from_chunks, [long.drop(columns="label")], layout="long")
    _expect(r"not among the given `annotators`", stats_from_dask, dd.from_pandas(long, npartitions=2),
            annotators=[10, 11])
    wide = _wide(data)
    wide.loc[4, ["a0", "a1", "a2", "a3"]] = np.nan
    _expect(r"items \[9\] have no label", stats_from_chunks, [wide])
    wide = _wide(data)
    wide.loc[2, "a1"] = 3
    _expect(r"column 'a1', items \[7\]", stats_from_dask, dd.from_pandas(wide, npartitions=2), layout="wide")
    _expect("empty", stats_from_chunks, [], layout="wide")
    a = SufficientStats.from_annotations(data, BINS)
    _expect("different score edges", a.merge, SufficientStats.from_annotations(data, Binning.equal_width(3)))
    _long(data, shuffle=True).to_csv(tmp_path / "bad.csv", index=False)
    _expect(r"bad.csv: .*sorted by item", read_stats_csv, tmp_path / "bad.csv", layout="long", chunksize=50)


def test_row_moments_merge_validate_and_old_objects(data):
    ref = SufficientStats.from_annotations(data, BINS)
    # Consistency with the per-bin score sums, and with the items (independent: a loop over rows).
    np.testing.assert_allclose(np.bincount(ref.group, weights=ref.row_score_sum, minlength=ref.n_bins), ref.score_sum,
                               rtol=1e-12)
    g = Binning.equal_width(6).assign(data.scores)
    for r in (0, ref.n_patterns // 2, ref.n_patterns - 1):
        rows = (g == ref.group[r]) & (data.labels == ref.patterns[r]).all(axis=1)
        assert rows.sum() == ref.counts[r]
        assert ref.row_score_sq[r] == pytest.approx(np.sum(data.scores[rows] ** 2), rel=1e-12)
    # An object made before the moments existed (as an old pickle restores it): the fields read None, merging
    # with it gives statistics without moments, and same_as tells them apart.
    old = SufficientStats.__new__(SufficientStats)
    old.__dict__.update({k: v for k, v in ref.__dict__.items() if not k.startswith("row_")})
    assert not old.has_row_moments and "score_sq" not in old.to_frame().columns
    half = SufficientStats.from_annotations(data.subset(np.arange(1000)), BINS)
    rest = SufficientStats.from_annotations(data.subset(np.arange(1000, data.n_items)), BINS)
    assert (half + rest).has_row_moments and not (half + old).has_row_moments
    assert not old.same_as(ref) and not ref.same_as(old)
    # Construction checks.
    import dataclasses

    with pytest.raises(ValueError, match="go together"):
        dataclasses.replace(ref, row_score_sq=None)
    with pytest.raises(ValueError, match=r"shape \(n_patterns,\)"):
        dataclasses.replace(ref, row_score_sum=ref.row_score_sum[:-1])
    with pytest.raises(ValueError, match=r"differs from `score_sum` in bins \[0\]"):
        dataclasses.replace(ref, row_score_sum=np.where(ref.group == 0, 0.0, ref.row_score_sum))
    with pytest.raises(ValueError, match="need per-bin `score_sum`"):
        dataclasses.replace(ref, score_sum=None)
