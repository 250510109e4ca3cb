"""EM for the score-dependent channel model: ``fit_em(model="score_dependent")``.

The model and prior are those of :func:`~noisycal_bayes.models.score_noise.score_dependent_dawid_skene` (the model
``fit_map`` / ``fit_nuts`` register for ``model="score_dependent"``): annotator ``j`` has a channel in every score
group ``g``, ``logit fpr_gj = a_j + tau_f e_gj``, ``logit u_gj = b_j + tau_u h_gj``, ``tpr_gj = fpr_gj + (1 - fpr_gj)
u_gj``, partially pooled toward the shared centre ``(fpr_j, u_j) = (sigmoid a_j, sigmoid b_j)``. The estimate is the
mode ``fit_map`` reports: the maximum of the log posterior density in NumPyro's unconstrained coordinates
``theta = (a, b, log tau_f, log tau_u, e, h, logit pi)`` (the density of the model's sample sites times the Jacobians
of the maps from ``theta``), by EM with the clean labels ``Y`` as the missing data.

E-step: ``T_r = P(Y = 1 | row r)`` at the row's group channel: :func:`noisycal_bayes.core.em.e_step` (the grouped
model's E-step) on the rows written over ``G x J`` virtual annotators, annotator ``j`` of group ``g`` being column
``g J + j`` (every other column missing), so that shared channels of the virtual annotators are the group channels.

M-step: the expected complete-data log posterior separates into the prevalences, in closed form
``pi_g = (n1_g + alpha_pi) / (n_g + alpha_pi + beta_pi)`` (the Beta prior plus the logit Jacobian), and the channel
block ``(a, b, log tau_f, log tau_u, e, h)``, whose expected log-likelihood is a sum over (group, annotator) of

``l_gj = m0 log f + (k0 + k1) log(1 - f) + k1 log(1 - u) + m1 log(1 - (1 - f)(1 - u))``

(``f = fpr_gj``, ``u = u_gj``, ``m_y``, ``k_y`` the expected positive and negative labels of the annotator in the
group on items of class ``y``), plus the log priors. It has no closed form; a few damped Newton steps
(:func:`noisycal_bayes.inference.map._newton`) with the exact gradient and Hessian (chain rule through ``x_gj = a_j +
tau_f e_gj``, ``w_gj = b_j + tau_u h_gj``, written out in :func:`_channel_block`) from the current iterate raise it
(a generalised EM, Dempster, Laird and Rubin 1977, section 3), so the observed log posterior never decreases, and a
fixed point is a stationary point of it. The Newton steps move the whole block, scales and deviations together
(they enter the rates only through their products ``tau e``).

The observed log posterior is ``sum_r c_r log P(A_r) + log p(theta)`` with every normalising constant, the value of
NumPyro's ``-potential_energy`` at the same point (tests/inference/test_score_em.py checks it against ``fit_map``'s
density at its mode). Everything is NumPy on the compressed ``(group, pattern)`` rows except the jitted E-step: nothing
of the model is compiled. Measurements, and why no SQUAREM: docs/model_checks.md, "Registration".
"""
from __future__ import annotations

import dataclasses
import warnings as _warnings

import numpy as np

from .._validation import check_em_settings, check_positive_int
from ..data import AnnotationSet, Binning

__all__ = ["NEWTON_STEPS", "fit_em_score_dependent", "log_posterior_score_dependent", "run_score_em"]

#: Newton steps per M-step (at most; fewer when the block's gradient vanishes). One suffices for the monotone
#: generalised EM; a few make each M-step close to exact, so the EM iteration count is that of the missing
#: information about ``Y`` alone.
NEWTON_STEPS = 5


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _sigmoid(x):
    return np.exp(_log_sigmoid(x))


def _betaln(a, b):
    from scipy.special import betaln

    return float(betaln(a, b))


class _Layout:
    """Where each part of the channel block ``v`` lives: ``a`` (J), ``b`` (J), ``log tau_f``, ``log tau_u``,
    ``e`` (G, J), ``h`` (G, J)."""

    def __init__(self, n_groups: int, n_annotators: int):
        g, j = n_groups, n_annotators
        self.G, self.J = g, j
        self.a, self.b = np.arange(j), j + np.arange(j)
        self.sf, self.su = 2 * j, 2 * j + 1
        self.e = 2 * j + 2 + np.arange(g * j).reshape(g, j)
        self.h = 2 * j + 2 + g * j + np.arange(g * j).reshape(g, j)
        self.size = 2 * j + 2 + 2 * g * j

    def split(self, v):
        return v[self.a], v[self.b], v[self.sf], v[self.su], v[self.e], v[self.h]


def _group_rates(layout, v):
    """``(x, w)`` (G, J): ``logit fpr_gj`` and ``logit u_gj`` at the channel block ``v``."""
    a, b, sf, su, e, h = layout.split(v)
    return a[None] + np.exp(sf) * e, b[None] + np.exp(su) * h


def _channels(layout, v):
    """``(fpr_group, tpr_group)`` (G, J) at ``v``."""
    x, w = _group_rates(layout, v)
    f, u = _sigmoid(x), _sigmoid(w)
    return f, f + (1 - f) * u


def _channel_prior(layout, v, prior, scale):
    """Log prior of the channel block in its unconstrained coordinates (with normalising constants and the Jacobians
    of ``fpr = sigmoid a``, ``u = sigmoid b``, ``tau = exp s``), its gradient and Hessian (diagonal)."""
    a, b, sf, su, e, h = layout.split(v)
    (af, bf), (au, bu) = prior.fpr, prior.u
    value = (np.sum(af * _log_sigmoid(a) + bf * _log_sigmoid(-a)) - a.size * _betaln(af, bf)
             + np.sum(au * _log_sigmoid(b) + bu * _log_sigmoid(-b)) - b.size * _betaln(au, bu))
    grad, hess = np.zeros(layout.size), np.zeros(layout.size)
    for idx, z, (al, be) in ((layout.a, a, (af, bf)), (layout.b, b, (au, bu))):
        p = _sigmoid(z)
        grad[idx] = al * (1 - p) - be * p
        hess[idx] = -(al + be) * p * (1 - p)
    # tau ~ HalfNormal(scale): log(2) - log(scale sqrt(2 pi)) - tau^2 / (2 scale^2), plus log tau (Jacobian).
    for idx, s in ((layout.sf, sf), (layout.su, su)):
        t2 = np.exp(2 * s)
        value += np.log(2.0) - np.log(scale) - 0.5 * np.log(2 * np.pi) - t2 / (2 * scale ** 2) + s
        grad[idx] = 1.0 - t2 / scale ** 2
        hess[idx] = -2.0 * t2 / scale ** 2
    n = e.size + h.size
    value += -0.5 * (np.sum(e * e) + np.sum(h * h)) - 0.5 * n * np.log(2 * np.pi)
    grad[layout.e], grad[layout.h] = -e, -h
    hess[layout.e], hess[layout.h] = -1.0, -1.0
    return value, grad, np.diag(hess)


def _channel_block(layout, v, stats, prior, scale):
    """``(Q, gradient, Hessian)`` of the channel block of the M-step objective at ``v``: the expected complete-data
    log-likelihood ``sum_gj l_gj`` (module docstring) from ``stats = (m0, k0, m1, k1)`` ((G, J) each) plus
    :func:`_channel_prior`.

    Per (group, annotator), with ``f = sigmoid x``, ``u = sigmoid w``, ``q = (1 - f)(1 - u) = 1 - tpr``:
    ``dl/dx = m0 (1 - f) - (k0 + k1) f + m1 f q / t``, ``dl/dw = -k1 u + m1 u q / t`` (``t = 1 - q``),
    ``d2l/dx2 = -(m0 + k0 + k1) f (1 - f) + m1 (f (1 - f) q / t - f^2 q / t^2)``,
    ``d2l/dw2 = -k1 u (1 - u) + m1 (u (1 - u) q / t - u^2 q / t^2)``, ``d2l/dxdw = -m1 f u q / t^2``;
    then the chain rule through ``x = a + tau_f e`` (``dx/da = 1``, ``dx/de = tau_f``, ``dx/ds_f = tau_f e``,
    ``d2x/de ds_f = tau_f``, ``d2x/ds_f^2 = tau_f e``), the same for ``w``.
    """
    m0, k0, m1, k1 = stats
    G, J = layout.G, layout.J
    x, w = _group_rates(layout, v)
    lf, l1f = _log_sigmoid(x), _log_sigmoid(-x)
    lu, l1u = _log_sigmoid(w), _log_sigmoid(-w)
    q = np.exp(l1f + l1u)  # 1 - tpr
    log_t = np.log1p(-np.minimum(q, 1 - 1e-300))
    value = np.sum(m0 * lf + (k0 + k1) * l1f + k1 * l1u + m1 * log_t)
    f, u = np.exp(lf), np.exp(lu)
    t = 1 - q
    r = q / t
    lx = m0 * (1 - f) - (k0 + k1) * f + m1 * f * r
    lw = -k1 * u + m1 * u * r
    lxx = -(m0 + k0 + k1) * f * (1 - f) + m1 * (f * (1 - f) * r - f * f * r / t)
    lww = -k1 * u * (1 - u) + m1 * (u * (1 - u) * r - u * u * r / t)
    lxw = -m1 * f * u * r / t
    _, _, sf, su, e, h = layout.split(v)
    tf, tu = np.exp(sf), np.exp(su)
    # Jacobians of x and w (G J rows) with respect to the block.
    P, rows = layout.size, np.arange(G * J)
    dx, dw = np.zeros((G * J, P)), np.zeros((G * J, P))
    dx[rows, np.tile(layout.a, G)] = 1.0
    dx[rows, layout.e.ravel()] = tf
    dx[rows, layout.sf] = (tf * e).ravel()
    dw[rows, np.tile(layout.b, G)] = 1.0
    dw[rows, layout.h.ravel()] = tu
    dw[rows, layout.su] = (tu * h).ravel()
    lx_, lw_ = lx.ravel(), lw.ravel()
    grad = dx.T @ lx_ + dw.T @ lw_
    cross = dx.T @ (lxw.ravel()[:, None] * dw)
    hess = dx.T @ (lxx.ravel()[:, None] * dx) + dw.T @ (lww.ravel()[:, None] * dw) + cross + cross.T
    # Second derivatives of x and w themselves (through tau = exp s).
    for s_idx, d_idx, lv, tau, dev in ((layout.sf, layout.e, lx, tf, e), (layout.su, layout.h, lw, tu, h)):
        hess[d_idx.ravel(), s_idx] += (lv * tau).ravel()
        hess[s_idx, d_idx.ravel()] += (lv * tau).ravel()
        hess[s_idx, s_idx] += np.sum(lv * tau * dev)
    pv, pg, ph = _channel_prior(layout, v, prior, scale)
    return value + pv, grad + pg, hess + ph


class _Rows:
    """The compressed rows with items, written over ``G x J`` virtual annotators for the grouped E-step."""

    def __init__(self, patterns, group, counts, n_groups):
        keep = np.asarray(counts) > 0
        pat = np.asarray(patterns, np.int32)[keep]
        self.group = np.asarray(group, np.int32)[keep]
        self.counts = np.asarray(counts, np.float64)[keep]
        self.keep = keep
        n_rows, J = pat.shape
        wide = np.full((n_rows, n_groups * J), -1, np.int32)
        cols = self.group[:, None] * J + np.arange(J)[None]
        wide[np.arange(n_rows)[:, None], cols] = pat
        self.wide = wide
        self.pos = (wide == 1).astype(np.float64)
        self.neg = (wide == 0).astype(np.float64)
        self.n_groups, self.n_annotators = n_groups, J
        self.n_g = np.bincount(self.group, weights=self.counts, minlength=n_groups)

    def e_step(self, fpr_group, tpr_group, prevalence):
        """``(log-likelihood, T (n_rows,))`` at group channels (G, J) and prevalences (G,)."""
        from ..core import x64
        from ..core.em import e_step

        with x64():
            ll, post = e_step(self.wide, self.group, self.counts, np.ravel(fpr_group), np.ravel(tpr_group),
                              np.asarray(prevalence, np.float64))
            return float(ll), np.asarray(post, np.float64)

    def rows_loglik(self, fpr_group, tpr_group, prevalence):
        """Per-item log-likelihood of each row with items (n_rows,) (NumPy)."""
        f, t = np.clip(fpr_group[self.group], 1e-12, 1 - 1e-12), np.clip(tpr_group[self.group], 1e-12, 1 - 1e-12)
        pat = self.wide.reshape(self.wide.shape[0], self.n_groups, self.n_annotators)[
            np.arange(self.group.size), self.group]
        pos, neg = pat == 1, pat == 0
        l0 = np.sum(np.where(pos, np.log(f), 0.0) + np.where(neg, np.log1p(-f), 0.0), axis=1)
        l1 = np.sum(np.where(pos, np.log(t), 0.0) + np.where(neg, np.log1p(-t), 0.0), axis=1)
        pi = np.clip(np.asarray(prevalence, np.float64)[self.group], 1e-12, 1 - 1e-12)
        return np.logaddexp(np.log1p(-pi) + l0, np.log(pi) + l1)

    def stats(self, post):
        """Expected label counts ``(m0, k0, m1, k1)`` (G, J) and the expected positives per group (G,)."""
        w1 = self.counts * post
        w0 = self.counts - w1
        shape = (self.n_groups, self.n_annotators)
        out = tuple((w @ m).reshape(shape) for w, m in ((w0, self.pos), (w0, self.neg), (w1, self.pos),
                                                           (w1, self.neg)))
        return out, np.bincount(self.group, weights=w1, minlength=self.n_groups)


def _prevalence_prior(z, prior):
    """Log prior of ``logit pi`` (Beta with the Jacobian), with its constant."""
    ap, bp = prior.prevalence
    return float(np.sum(ap * _log_sigmoid(z) + bp * _log_sigmoid(-z)) - z.size * _betaln(ap, bp))


def log_posterior_score_dependent(rows, layout, v, z, prior, scale):
    """Observed log posterior density at ``(v, z)`` (channel block, logit prevalences) and the E-step there:
    ``(objective, log-likelihood, T)``."""
    f, t = _channels(layout, v)
    ll, post = rows.e_step(f, t, _sigmoid(z))
    prior_v, _, _ = _channel_prior(layout, v, prior, scale)
    return ll + prior_v + _prevalence_prior(z, prior), ll, post


def _m_step(rows, layout, v, post, prior, scale, n_items):
    """One M-step from the E-step ``post``: ``(v_new, z_new)``."""
    from .map import _newton

    stats, n1 = rows.stats(post)
    ap, bp = prior.prevalence
    pi = (n1 + ap) / (rows.n_g + ap + bp)
    z = np.log(pi) - np.log1p(-pi)

    def vgh(x):  # minimise -Q / n (the per-item scale of fit_map's Newton)
        # A trial step of the line search may overflow (tau = exp s); its non-finite value rejects it.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            val, g, h = _channel_block(layout, x, stats, prior, scale)
        return -val / n_items, -g / n_items, -h / n_items

    v_new, _, _, _ = _newton(vgh, v, NEWTON_STEPS, 1e-12)
    return v_new, z


def run_score_em(rows, layout, v, z, *, prior, scale, max_iter, tol):
    """The EM iterations from ``(v, z)`` (channel block, logit prevalences) on ``rows`` (:class:`_Rows`; their counts
    may be weights, e.g. a bootstrap replicate's). Returns ``(v, z, objective, loglik, trace, converged, n_iter)``:
    the last iterate, its log posterior and log-likelihood, the objective at the start and after each iteration, and
    whether :func:`fit_em_score_dependent`'s stopping rule was met within ``max_iter``."""
    n_items = float(rows.counts.sum())

    def rates(v, z):
        f, t = _channels(layout, v)
        return np.concatenate([f.ravel(), t.ravel(), _sigmoid(z), np.exp([v[layout.sf], v[layout.su]])])

    obj, ll, post = log_posterior_score_dependent(rows, layout, v, z, prior, scale)
    trace, converged, it = [obj], False, 0
    while it < max_iter:
        it += 1
        v_new, z_new = _m_step(rows, layout, v, post, prior, scale, n_items)
        obj_new, ll_new, post_new = log_posterior_score_dependent(rows, layout, v_new, z_new, prior, scale)
        if not np.isfinite(obj_new):
            break
        small = (np.max(np.abs(rates(v_new, z_new) - rates(v, z))) <= tol
                 and abs(obj_new - obj) <= tol * (1 + abs(obj_new)))
        v, z, obj, ll, post = v_new, z_new, obj_new, ll_new, post_new
        trace.append(obj)
        if small:
            converged = True
            break
    return v, z, obj, ll, np.asarray(trace), converged, it


def fit_em_score_dependent(data, *, groups=Binning.equal_mass(5), n_starts=None, seed: int = 0, prior=None,
                           max_iter: int = 1000, tol: float = 1e-8, min_gap: float = 0.05, starts=None,
                           orientation: str = "auto", scale: float | None = None, func: str = "fit_em"):
    """``fit_em(model="score_dependent")``: the posterior mode of the score-dependent channel model by EM.

    The start is the shared-channel fit ``fit_em(data, model="grouped", groups=groups, n_starts=n_starts, seed=seed,
    starts=starts, orientation=orientation, min_gap=min_gap)`` (its starts, orientation rule and screen, its own
    ``max_iter`` and ``tol``; its warnings are re-issued), at ``tau_f = tau_u = 0.1`` and zero deviations, as the start of ``fit_map(model="score_dependent")``.
    The parametrisation keeps every group gap ``tpr_gj - fpr_gj > 0``, so the orientation chosen there holds in every
    group. The iterations stop by :func:`fit_em`'s rule: every rate (group channels, prevalences) and both scales moved
    by at most ``tol`` and the objective by at most ``tol (1 + |objective|)``.

    Parameters
    ----------
    data, groups, n_starts, seed, max_iter, tol, min_gap, starts, orientation
        As in :func:`~noisycal_bayes.inference.fit_em`.
    prior : Prior or None
        The priors of the centre and the prevalences (None: :data:`~noisycal_bayes.models.DEFAULT_PRIOR`, as
        ``fit_map``; the hierarchical priors ``tau ~ HalfNormal(scale)``, deviations ``Normal(0, 1)`` are the model's).
    scale : float, optional
        HalfNormal scale of ``tau_f`` and ``tau_u`` (default the model's,
        :data:`~noisycal_bayes.models.score_noise.DEFAULT_SCALE`).

    Returns
    -------
    FitResult
        ``model="score_dependent"``, ``method="em"``, ``point`` with the variables of
        ``fit_map(model="score_dependent")`` (``fpr_group``, ``tpr_group`` (G, J), ``prevalence`` (G,), ``fpr``,
        ``tpr``, ``gap`` the item-weighted average channel, ``fpr_centre``, ``u_centre``, ``tpr_centre``,
        ``gap_centre``, ``tau_fpr``, ``tau_u``, ``e_fpr``, ``e_u``), so :attr:`~noisycal_bayes.models.result.FitResult.group_channels` is set;
        ``details``: ``objective`` (log posterior at the estimate), ``loglik_trace`` (objective after each
        iteration), ``loglik_rows``, ``start`` (the shared-channel fit's ``n_iter``, ``loglik``).

    Raises
    ------
    ValueError
        Not an AnnotationSet with scores; one annotator; gold labels or repeated labels (the rows hold neither); bad
        numeric settings.

    Warns
    -----
    ConvergenceWarning
        The stopping rule was not met within ``max_iter`` (the last iterate, ``converged=False``).
    IdentifiabilityWarning, SmallGapWarning, ConvergenceWarning
        Those of the shared-channel start, re-issued.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> sim = simulate_annotations(2000, fpr=[0.1, 0.2, 0.1], tpr=[0.9, 0.8, 0.7], seed=1)
    >>> fit = fit_em_score_dependent(sim.data, groups=Binning.equal_mass(3), n_starts=2)
    >>> trace = fit.details["loglik_trace"]   # the log posterior after each iteration: never decreasing
    >>> fit.converged, bool(np.all(np.diff(trace) > -1e-9 * abs(trace[-1])))
    (True, True)
    """
    from ..models import DEFAULT_PRIOR
    from ..models.score_noise import DEFAULT_SCALE
    from ..warnings import ConvergenceWarning
    from .alternatives import _table, check_row_data, group_channel_result
    from .em import fit_em

    if not (isinstance(data, AnnotationSet) and data.kind == "binary"):
        raise ValueError(f"{func}: model='score_dependent' needs an AnnotationSet with scores (its channels are per "
                         f"score group); got {type(data).__name__}.")
    if data.n_annotators < 2:
        raise ValueError(f"{func}: model='score_dependent' needs at least two annotators; got {data.n_annotators}.")
    data.require_scores()
    check_row_data(data, func, "score_dependent")
    _, max_iter, tol, min_gap = check_em_settings(1, max_iter, tol, min_gap)
    if n_starts is not None:
        n_starts = check_positive_int(n_starts, name="n_starts")
    prior = DEFAULT_PRIOR if prior is None else prior
    scale = DEFAULT_SCALE if scale is None else float(scale)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"{func}: `scale` must be a positive number; got {scale!r}.")
    assignment, inp = _table(data, groups, func)
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        start = fit_em(data, model="grouped", groups=assignment.index, n_starts=n_starts, seed=seed, starts=starts,
                       orientation=orientation, min_gap=min_gap, path="patterns")
    notes = [(w.category, str(w.message)) for w in caught]
    for cls, text in notes:
        _warnings.warn(text, cls, stacklevel=3)
    if start.channel is None:
        return dataclasses.replace(start, model="score_dependent", converged=False,
                                   reason=f"{func}: the shared-channel start failed: {start.reason}")
    G, J = assignment.n_groups, data.n_annotators
    layout = _Layout(G, J)
    rows = _Rows(inp.patterns, inp.row_group, inp.counts, G)
    fpr0 = np.clip(np.asarray(start.channel.fpr), 1e-3, 0.98)
    tpr0 = np.clip(np.asarray(start.channel.tpr), fpr0 + 1e-3, 0.999)
    u0 = (tpr0 - fpr0) / (1 - fpr0)
    v = np.zeros(layout.size)
    v[layout.a], v[layout.b] = np.log(fpr0) - np.log1p(-fpr0), np.log(u0) - np.log1p(-u0)
    v[layout.sf] = v[layout.su] = np.log(0.1)
    pi0 = np.clip(np.asarray(start.prevalence, np.float64).reshape(-1), 1e-3, 1 - 1e-3)
    z = np.log(pi0) - np.log1p(-pi0)

    v, z, obj, ll, trace, converged, it = run_score_em(rows, layout, v, z, prior=prior, scale=scale,
                                                       max_iter=max_iter, tol=tol)
    if not converged:
        msg = (f"{func}: EM on the score-dependent model stopped after {it} iterations with rates or the log "
               f"posterior ({obj:.6g}) still moving by more than tol={tol}; the last iterate is returned "
               "(converged=False). Raise `max_iter`, or check against fit_map(model='score_dependent').")
        _warnings.warn(msg, ConvergenceWarning, stacklevel=3)
        notes.append((ConvergenceWarning, msg))
    a, b, sf, su, e, h = layout.split(v)
    f_g, t_g = _channels(layout, v)
    fc, uc = _sigmoid(a), _sigmoid(b)
    # The sites of fit_map's point, in its (sorted) order.
    sites = {"e_fpr": e, "e_u": h, "fpr_centre": fc, "gap_centre": (1 - fc) * uc, "prevalence": _sigmoid(z),
             "tau_fpr": np.exp(sf), "tau_u": np.exp(su), "tpr_centre": fc + (1 - fc) * uc, "u_centre": uc}
    loglik_rows = np.zeros(rows.keep.size)
    loglik_rows[rows.keep] = rows.rows_loglik(f_g, t_g, sites["prevalence"])
    return group_channel_result(
        data, "score_dependent", "em", assignment, inp, prior, sites, f_g, t_g, loglik_rows, func=func,
        converged=converged, loglik=ll, n_iter=it, warnings=tuple(t for _, t in notes),
        settings=dict(seed=seed, start="em", n_starts=start.settings.get("n_starts"), max_iter=max_iter, tol=tol,
                      min_gap=min_gap, orientation=orientation, scale=scale, newton_steps=NEWTON_STEPS),
        extra_details={"objective": obj, "loglik_trace": trace, "orientation":
                       start.details.get("orientation"), "start": {"n_iter": start.n_iter, "loglik": start.loglik,
                                                                   "converged": start.converged}})
