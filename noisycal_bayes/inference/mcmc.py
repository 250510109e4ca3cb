"""MCMC health: R-hat, bulk and tail ESS, divergences, turned into warnings that say what to do.

R-hat and ESS are computed here with NumPy, all scalars at once, following ArviZ's algorithms step by step
(``arviz.stats.diagnostics`` of ArviZ 0.23: ``_rhat_rank``, ``_ess_bulk``, ``_ess_tail``, ``_ess``); the
tests check them against ``az.rhat``/``az.ess``. ArviZ itself is not called: on a typical fit its per-scalar
loops (``xarray.apply_ufunc``, ``scipy.stats.norm.ppf``) cost a tenth or more of the whole fit. The table
is built here with pandas, not with ``az.summary`` (whose columns differ between ArviZ 0.23 and 1.x).

Thresholds (Vehtari, Gelman, Simpson, Carpenter & Bürkner 2021, "Rank-normalization, folding, and
localization: an improved R-hat"): rank-normalised split R-hat below 1.01, and bulk and tail ESS of at
least 100 per chain.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..warnings import ConvergenceWarning

RHAT_MAX = 1.01
MIN_ESS_PER_CHAIN = 100
_TAIL_PROBS = (0.05, 0.95)  # ArviZ's default ``prob`` for ``ess(method="tail")``
_MIN_DRAWS = 4  # ArviZ returns nan for fewer draws per chain (``_not_valid(min_draws=4)``)


def _split_chains(x):
    """Split every chain in two halves; shape (k, n_chains, n_draws) -> (k, 2 n_chains, n_draws // 2).

    As ArviZ's ``_split_chains``: the first and the last ``n_draws // 2`` draws, so the middle draw of an odd
    count is dropped.
    """
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half:]], axis=1)


def _z_scale(x):
    """Rank-normalise each row: ``ndtri((r - 3/8) / (n + 1/4))``, r the average rank (ties share it).

    Parameters
    ----------
    x : ndarray of shape (k, n), no nan

    Returns
    -------
    z : ndarray of shape (k, n)
        As ArviZ's ``_z_scale`` (``scipy.stats.rankdata(method="average")``, Blom's offset c = 3/8,
        ``norm.ppf``, which is ``scipy.special.ndtri``), row by row.
    x_sorted : ndarray of shape (k, n)
        Each row of ``x`` sorted (a by-product, used for medians and quantiles).
    """
    from scipy.special import ndtri

    k, n = x.shape
    order = np.argsort(x, axis=1)
    x_sorted = np.take_along_axis(x, order, axis=1)
    pos = np.arange(n)
    starts = np.ones((k, n), dtype=bool)  # True where a run of equal sorted values begins
    starts[:, 1:] = x_sorted[:, 1:] != x_sorted[:, :-1]
    if starts.all():  # no ties (the usual case for continuous draws): the sorted ranks are 1 .. n
        rank_index = np.broadcast_to(2 * pos, (k, n))
    else:
        ends = np.ones((k, n), dtype=bool)  # True where a run ends
        ends[:, :-1] = starts[:, 1:]
        first = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)  # 0-based position where a run begins
        last = np.minimum.accumulate(np.where(ends, pos, n)[:, ::-1], axis=1)[:, ::-1]  # ... and where it ends
        rank_index = first + last
    # The average rank of a run, (first + last + 2) / 2, is a multiple of 1/2 in [1, n]: evaluate the normal
    # quantile once per possible average rank (2n - 1 values, with scipy's arithmetic) and look it up.
    c = 3 / 8
    avg_ranks = 0.5 * (np.arange(2 * n - 1) + 2)
    z_of_rank = ndtri((avg_ranks - c) / (n - 2 * c + 1))
    z = np.empty((k, n))
    np.put_along_axis(z, order, z_of_rank[rank_index], axis=1)
    return z, x_sorted


def _median_sorted(x_sorted):
    """Median of each row of an already sorted (k, n) array, with ``np.median``'s arithmetic (the mean of the
    two middle values, in the array's precision)."""
    n = x_sorted.shape[1]
    return np.mean(x_sorted[:, (n - 1) // 2:n // 2 + 1], axis=1)


def _rhat(z):
    """Split R-hat of each row; ``z`` of shape (k, n_chains, n_draws) -> (k,).

    ``sqrt((B / W + n - 1) / n)`` with ``B = n var(chain means)`` and ``W`` the mean within-chain variance
    (both with ddof 1): Gelman et al. (BDA3, section 11.4), as ArviZ's ``_rhat``. A row with ``W = 0`` gives
    nan (constant) or inf (chains constant at different values), as in ArviZ.
    """
    n = z.shape[2]
    between = n * np.var(np.mean(z, axis=2), axis=1, ddof=1)
    within = np.mean(np.var(z, axis=2, ddof=1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _ess(x):
    """Effective sample size of each row's mean; ``x`` of shape (k, n_chains, n_draws) -> (k,), float.

    ArviZ's ``_ess`` (Vehtari et al. 2021, eq. 10-11 and appendix A), vectorised over rows. With
    ``rho_t = 1 - (W - mean_c acov_c(t)) / var_plus`` (autocovariances by FFT along the draws, ``W`` the mean
    within-chain variance, ``var_plus = W (n-1)/n + var(chain means)``), Geyer's initial positive sequence
    keeps the pairs ``P_j = rho_2j + rho_2j+1`` up to the first ``P_j <= 0`` (or lag ``n - 3``), the initial
    monotone sequence replaces each kept pair sum by the running minimum, and ``tau = -1 + 2 sum_j P_j +
    rho_2J`` (the first even lag after the kept pairs, if positive), floored at ``1 / log10(N)``;
    ``ESS = N / tau`` with ``N = n_chains n_draws``. A constant row (range below float resolution) gets
    ``N``.
    """
    from scipy.fft import next_fast_len

    k, n_chains, n = x.shape
    size = n_chains * n
    # Autocovariance at every lag by FFT, zero-padded to a fast length >= 2n so it is not circular
    # (ArviZ's ``autocov``: scipy.fftpack.next_fast_len, i.e. a 5-smooth length).
    m = next_fast_len(2 * n, real=True)
    centred = x - x.mean(axis=2, keepdims=True)
    spec = np.fft.rfft(centred, n=m, axis=2)
    # |spec|^2 in place (spec * conj(spec), whose imaginary part is 0), on the float view: faster than a
    # complex multiply, and irfft needs a complex input.
    parts = spec.view(np.float64)
    parts *= parts
    spec.real = parts[..., 0::2] + parts[..., 1::2]
    spec.imag = 0.0
    acov = np.fft.irfft(spec, n=m, axis=2)[:, :, :n]
    acov /= n
    chain_mean = x.mean(axis=2)
    mean_var = np.mean(acov[:, :, 0], axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if n_chains > 1:
        var_plus += np.var(chain_mean, axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - np.mean(acov, axis=1)) / var_plus[:, None]  # (k, n)
    rho[:, 0] = 1.0
    # ArviZ's loops, in closed form. Pair j holds lags (2j, 2j+1); ArviZ visits pairs j = 1 .. j_max while
    # the previous pair sum is > 0, so the number of pairs visited is J = min(j_max, first j with not P_j > 0).
    n_pairs = n // 2
    pair = rho[:, 0:2 * n_pairs:2] + rho[:, 1:2 * n_pairs:2]  # (k, n_pairs); pair 0 is 1 + rho_1
    j_max = max((n - 3) // 2, 0)
    stop = ~(pair > 0)  # also True for nan
    first_stop = np.where(stop.any(axis=1), np.argmax(stop, axis=1), n_pairs)
    n_kept = np.minimum(j_max, first_stop)  # J: pairs 0 .. J-1 are kept, all with P_j > 0
    # Initial monotone sequence: each kept pair sum replaced by the running minimum (ArviZ sets both lags
    # of a pair to half the previous pair's sum, which keeps the sums exact).
    monotone = np.minimum.accumulate(pair, axis=1)
    kept = np.arange(n_pairs)[None, :] < n_kept[:, None]
    sum_pairs = np.sum(np.where(kept, monotone, 0.0), axis=1)
    rows = np.arange(k)
    rho_even = rho[rows, 2 * n_kept]  # first even lag after the kept pairs (lag 0, i.e. 1, when J = 0)
    pair_last = pair[rows, n_kept]
    last = np.where((pair_last >= 0) | (rho_even > 0), rho_even, 0.0)  # stored if P_J >= 0 or rho_2J > 0
    tau = -1.0 + 2.0 * sum_pairs + last
    floor = 1 / np.log10(size)
    tau = np.where(floor > tau, floor, tau)  # Python ``max(tau, floor)``: keeps a nan tau
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = size / tau
    ess[np.isnan(rho[:, 1])] = np.nan
    constant = (np.max(x, axis=(1, 2)) - np.min(x, axis=(1, 2))) < np.finfo(float).resolution
    ess[constant] = size
    return ess


def _type7_quantile_positions(size, prob):
    """Order statistic ``k`` and weight ``g`` of the R type-7 quantile ``(1 - g) x_(k) + g x_(k+1)``.

    ``x_(k)`` is the k-th smallest of ``size`` values (1-based); the arithmetic is that of
    ``scipy.stats.mstats.mquantiles(alphap=1, betap=1)``, ArviZ's ``_quantile``.
    """
    p = np.atleast_1d(np.asarray(prob))
    m = 1.0 + p * (1.0 - 1.0 - 1.0)
    aleph = size * p + m
    k = np.floor(aleph.clip(1, size - 1)).astype(int)
    gamma = (aleph - k).clip(0, 1)
    return int(k[0]), float(gamma[0])


def _rhat_ess(x):
    """Rank-normalised split R-hat, bulk ESS and tail ESS of each scalar.

    Parameters
    ----------
    x : ndarray of shape (k, n_chains, n_draws)
        Draws of k scalars, floating (its own precision is kept for folding, as in ArviZ).

    Returns
    -------
    r_hat, ess_bulk, ess_tail : ndarray of shape (k,)
        As ``az.rhat(method="rank")``, ``az.ess(method="bulk")`` and ``az.ess(method="tail")``: nan for a
        scalar with a nan draw or fewer than 4 draws per chain; R-hat also nan with a single chain.
    """
    k, n_chains, n_draws = x.shape
    r_hat = np.full(k, np.nan)
    ess_bulk = np.full(k, np.nan)
    ess_tail = np.full(k, np.nan)
    valid = ~np.isnan(x).any(axis=(1, 2))
    if n_draws < _MIN_DRAWS or not valid.any():
        return r_hat, ess_bulk, ess_tail
    x = x[valid]
    kv = x.shape[0]
    split = _split_chains(x)
    flat = split.reshape(kv, -1)
    z_bulk, flat_sorted = _z_scale(flat)
    z_bulk = z_bulk.reshape(split.shape)
    # Tail ESS: indicators of the draws at or below the 5% and 95% quantiles of all draws (unsplit; with an
    # even draw count the split draws are all the draws, already sorted).
    full = x.reshape(kv, -1)
    positions = [_type7_quantile_positions(full.shape[1], p) for p in _TAIL_PROBS]
    if n_draws % 2 == 0:
        part = flat_sorted
    else:
        part = np.partition(full, sorted({j for k_, _ in positions for j in (k_ - 1, k_)}), axis=1)
    indicators = []
    for k_, gamma in positions:
        q = (1.0 - gamma) * part[:, k_ - 1].astype(np.float64) + gamma * part[:, k_].astype(np.float64)
        indicators.append(_split_chains((x <= q[:, None, None]).astype(np.float64)))
    ess_all = _ess(np.concatenate([z_bulk] + indicators, axis=0))
    ess_bulk[valid] = ess_all[:kv]
    low, high = ess_all[kv:2 * kv], ess_all[2 * kv:]
    ess_tail[valid] = np.where(high < low, high, low)  # Python ``min(low, high)``, as ArviZ
    if n_chains >= 2:
        rhat_bulk = _rhat(z_bulk)
        # Folded: distance to the median of the split draws, in the draws' own precision (as ArviZ).
        folded = np.abs(flat - _median_sorted(flat_sorted)[:, None])
        rhat_tail = np.full(kv, np.nan)
        ok = ~np.isnan(folded).any(axis=1)  # ArviZ's ``_rhat`` gives nan if the folded draws hold a nan
        if ok.any():
            rhat_tail[ok] = _rhat(_z_scale(folded[ok])[0].reshape(split[ok].shape))
        r_hat[valid] = np.where(rhat_tail > rhat_bulk, rhat_tail, rhat_bulk)  # Python ``max(bulk, tail)``
    return r_hat, ess_bulk, ess_tail


def mcmc_diagnostics(draws: dict, dims: dict | None = None, coords: dict | None = None) -> pd.DataFrame:
    """R-hat and bulk/tail ESS of every scalar in ``draws``.

    Parameters
    ----------
    draws : dict of name -> array of shape (n_chains, n_draws, ...)
    dims : dict of name -> tuple of dimension names for the trailing axes, optional
    coords : dict of dimension name -> labels, optional (used to label the rows)

    Returns
    -------
    DataFrame
        One row per scalar, indexed by ``"name[label]"``, with columns ``name``, ``index`` (position
        within the variable), ``r_hat``, ``ess_bulk``, ``ess_tail``.

    Raises
    ------
    ValueError
        If an array in ``draws`` has fewer than two axes.

    Notes
    -----
    The three columns follow ArviZ's algorithms (``arviz.stats.diagnostics`` in ArviZ 0.23), after Vehtari,
    Gelman, Simpson, Carpenter & Bürkner (2021), sections 4.1-4.3 and appendix A:

    - each chain is split in halves (the middle draw of an odd count dropped) and the draws are
      rank-normalised, ``z = ndtri((r - 3/8) / (S + 1/4))`` with ``r`` the average rank among all ``S``
      split draws;
    - ``r_hat`` is ``max(R(z), R(z_fold))``, ``R = sqrt((B / W + n - 1) / n)`` the split R-hat of
      Gelman et al. (BDA3, 11.4) and ``z_fold`` the rank-normalised ``|x - median|``;
    - ``ess_bulk`` is the ESS of ``z`` and ``ess_tail`` the smaller ESS of the indicators ``x <= q_0.05``
      and ``x <= q_0.95`` (type-7 quantiles of all draws), each ``N / tau`` with ``tau`` from Geyer's initial
      monotone sequence of FFT autocorrelations, floored at ``1 / log10(N)``.

    Unlike ArviZ (which loops over scalars in Python), all scalars sharing ``(n_chains, n_draws)`` and
    precision are computed at once on a ``(k, chain, draw)`` array; the tests check equality with
    ``az.rhat`` and ``az.ess`` to a relative 1e-10. As in ArviZ: a scalar with a nan draw, or with fewer
    than 4 draws per chain, gets nan; ``r_hat`` is nan with one chain and for a constant scalar (whose
    ESS is ``N``, the number of split draws); float32 draws are folded in float32. One deliberate
    difference: with every chain constant at different values, ``r_hat`` is inf (ArviZ's NumPy path);
    ArviZ 0.x with Numba returns nan there (rounding noise of its one-pass variance). ArviZ 1.x's
    ``ess(method="tail")`` defaults to the probabilities ``rcParams["stats.ci_prob"]``, not 5%/95%.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> table = mcmc_diagnostics({"x": rng.normal(size=(4, 500))})
    >>> bool(table.loc["x", "r_hat"] < 1.01)
    True
    """
    dims = dims or {}
    coords = coords or {}
    arrays = {}
    for name, arr in draws.items():
        arr = np.asarray(arr)
        if arr.ndim < 2:
            raise ValueError(f"`draws[{name!r}]` must have shape (n_chains, n_draws, ...); got shape {arr.shape}.")
        if not np.issubdtype(arr.dtype, np.floating):
            arr = arr.astype(np.float64)
        arrays[name] = arr
    # Stack the scalars of all variables that share (n_chains, n_draws) and precision into one
    # (k, n_chains, n_draws) array, and compute every diagnostic for all of them at once.
    groups = {}
    for name, arr in arrays.items():
        groups.setdefault((arr.shape[:2], arr.dtype), []).append(name)
    stats = {}
    for (shape2, dtype), names in groups.items():
        blocks = [arrays[name].reshape(shape2 + (-1,)) for name in names]
        stacked = np.concatenate(blocks, axis=2).transpose(2, 0, 1)
        r_hat, ess_bulk, ess_tail = _rhat_ess(np.ascontiguousarray(stacked))
        start = 0
        for name, block in zip(names, blocks):
            stop = start + block.shape[2]
            stats[name] = (ess_bulk[start:stop], ess_tail[start:stop], r_hat[start:stop])
            start = stop
    rows = []
    for name in draws:
        rb, rt, rr = stats[name]
        shape = np.asarray(draws[name]).shape[2:]
        for flat, idx in enumerate(np.ndindex(*shape) if shape else [()]):
            labels = []
            for axis, k in enumerate(idx):
                dim = tuple(dims.get(name, ()))[axis] if axis < len(dims.get(name, ())) else None
                lab = coords.get(dim)
                labels.append(str(lab[k]) if lab is not None and k < len(lab) else str(k))
            label = name if not idx else f"{name}[{', '.join(labels)}]"
            rows.append({"parameter": label, "name": name, "index": idx, "r_hat": rr.ravel()[flat],
                         "ess_bulk": rb.ravel()[flat], "ess_tail": rt.ravel()[flat]})
    return pd.DataFrame(rows).set_index("parameter")


def check_mcmc(table: pd.DataFrame, *, n_chains: int, n_divergent: int, n_draws: int, n_max_depth: int = 0,
               max_tree_depth: int = 10, func: str = "fit_nuts", stacklevel: int = 3) -> list:
    """Emit a :class:`ConvergenceWarning` for each problem, saying what to do. Returns the messages.

    Parameters
    ----------
    table : DataFrame from :func:`mcmc_diagnostics`
    n_chains, n_draws : int
        Chains and post-warm-up draws per chain.
    n_divergent : int
        Divergent transitions after warm-up (all chains).
    n_max_depth : int
        Transitions that hit the maximum tree depth.
    """
    notes = []
    min_ess = MIN_ESS_PER_CHAIN * n_chains
    if n_divergent > 0:
        notes.append(
            f"{func}: {n_divergent} divergent transitions after warm-up: the sampler could not follow the posterior "
            "everywhere, so the draws may be biased. Raise `target_accept` (e.g. 0.95) and look at where the divergent "
            "draws are (to_arviz().sample_stats.diverging); if they persist, the model or the groups are probably "
            "weakly identified.")
    if n_chains > 1:
        bad = table.index[~(table["r_hat"] <= RHAT_MAX)]
        if len(bad):
            worst = float(np.nanmax(table["r_hat"].to_numpy())) if np.isfinite(table["r_hat"]).any() else float("nan")
            notes.append(
                f"{func}: R-hat above {RHAT_MAX} for {list(bad[:6])}{' ...' if len(bad) > 6 else ''} (max {worst:.3f}): "
                "the chains disagree. Run longer (`n_warmup`, `n_draws`), and if they still disagree the posterior has "
                "several modes: check identifiability (more annotators, better-separated groups).")
    low = table.index[~((table["ess_bulk"] >= min_ess) & (table["ess_tail"] >= min_ess))]
    if len(low):
        worst = float(np.nanmin(np.minimum(table["ess_bulk"], table["ess_tail"])))
        notes.append(
            f"{func}: effective sample size below {min_ess} ({MIN_ESS_PER_CHAIN} per chain) for {list(low[:6])}"
            f"{' ...' if len(low) > 6 else ''} (min {worst:.0f} of {n_chains * n_draws} draws): intervals and tail "
            "quantiles are unreliable. Increase `n_draws` (and `n_warmup`).")
    if n_max_depth > 0:
        notes.append(
            f"{func}: {n_max_depth} transitions hit the maximum tree depth ({max_tree_depth}): sampling is inefficient "
            "(not biased). Raise `max_tree_depth` or check for a badly scaled posterior.")
    for msg in notes:
        warnings.warn(msg, ConvergenceWarning, stacklevel=stacklevel)
    return notes
