"""Where the next labels narrow an interval most: a ranked labelling plan from a fitted channel model (issue 37).

Given a fit (``fit_em`` / ``fit_map`` / ``fit_nuts``, binary or K classes) and a budget of extra labels (or of gold
checks), :func:`plan_labels` ranks (item, annotator) pairs (or items) by the expected reduction of the variance of a
target computed from the clean labels, the NC-ECE by default, and chooses a batch greedily.

**The target and its variance.** The target is a function ``f(Q)`` of the clean-label indicators ``Q`` (n, K); its
interval is read at ``Q = e_{Y}`` with the clean labels ``Y`` unknown. With ``q_i = P(Y_i | data)`` (the fit's
clean-label posterior, posterior mean over draws) and the channels ``C[j, y, a] = P(A_j = a | Y = y)``, its
reducible variance splits into two parts (law of total variance, each linearised around ``q``):

- *label part* (items' clean labels given the channels, independent across items):
  ``V_L = sum_i a_i' (diag q_i - q_i q_i') a_i`` with ``a_i`` the target's per-item weights (its gradient
  ``G_i = df/dq_i`` for a smooth target);
- *channel part* (channel uncertainty moving every ``q_i``): ``V_C = sum_j g_j' Sigma_j g_j``, ``g_j = df/dC_j``
  by the chain rule through Bayes' rule, ``dq_iy'/dC[j, y, a] = n_ija q_iy' (1[y' = y] - q_iy) / C[j, y, a]``
  (``n_ija``: labels ``a`` from ``j`` on ``i``), so ``g_j[y, a] = sum_i n_ija q_iy (G_iy - G_i . q_i) / C[j, y, a]``;
  ``Sigma_j`` is the posterior covariance of ``vec C_j`` (K^2 x K^2): from the draws of a NUTS fit, else the inverse
  Fisher information of ``j``'s labels under the row-sum constraints (below).

The evaluated items' sampling uncertainty (the bootstrap of the plug-in route) does not change with more labels on
the same items, so it is left out: ``width = 2 z_{(1+level)/2} sqrt(V_L + V_C)`` is the width of the interval for
the *sample* target (the latent route of :func:`~noisycal_bayes.posterior_nc_ece`), a normal approximation.

**NC-ECE** (default; DESIGN §2: binary ``sum_k |sum_{i in B_k} (Y_i - z_i)| / n`` on the scores; K classes the
top-label version on the confidence ``c_i = max_k p_ik`` with ``1[Y_i = yhat_i]``). The absolute value is not
differentiable at a calibrated bin, so each bin mass ``e_k`` is treated as ``N(mu_k, s_k^2)`` with ``mu_k =
sum_{i in B_k} (q_it - c_i) / n`` and ``s_k^2 = sum_{i in B_k} q_it (1 - q_it) / n^2`` (``t``: class 1, or
``yhat_i``) and ``|e_k|`` as a folded normal: ``E|e_k| = s_k sqrt(2/pi) exp(-t^2/2) + mu_k erf(t / sqrt 2)``,
``t = mu_k / s_k``, so

- the channel gradient is ``dE|e_k| / dmu_k = erf(t / sqrt 2)`` (a smoothed sign): ``G_i = erf(t / sqrt 2) e_t / n``;
- the label weights use ``dVar|e_k| / ds_k^2 = rho_k = 1 - 2 E|e_k| phi(t) / s_k`` (``1 - 2/pi`` at a calibrated
  bin, 1 far from it): ``a_i = sqrt(rho_k) e_t / n``.

A user target (any callable ``f(q) -> float`` of the (n, K) clean-label probabilities) uses ``a_i = G_i``, with
``G`` from ``jax.grad`` when ``f`` is written in ``jax.numpy``, else from central finite differences.

**One more label** from annotator ``j`` on item ``i`` (preposterior analysis, channels at their posterior mean
``Cbar``): the label ``l`` has predictive ``P(l) = sum_y q_iy Cbar[j, y, l]`` and gives ``q_i' = q_i * Cbar[j, :, l] /
P(l)``, so the label part falls by ``a_i'(diag q_i - q_i q_i')a_i - sum_l P(l) a_i'(diag q_i' - q_i' q_i'')a_i``,
computed exactly (an item given several labels in one batch keeps every branch of their outcomes). The channel part
falls because the label adds to ``j``'s information the expected Fisher information of one label whose clean label
has distribution ``q_i``, ``Delta I = sum_a u_a u_a'`` with ``u_a[(y, a)] = q_iy / sqrt(P(a))`` (zero elsewhere);
with a Gaussian approximation of ``C_j``'s posterior the update is Kalman's,
``Sigma' = Sigma - Sigma U (I_K + U' Sigma U)^{-1} U' Sigma``, so ``V_C`` falls by ``h' (I_K + U' Sigma U)^{-1} h``,
``h = U' Sigma g_j``: no inverse of ``Sigma`` is needed (draw covariances are singular along the row sums).

**A gold check** on item ``i`` sets ``Y_i``: the label part ``a_i'(diag q_i - q_i q_i')a_i`` goes to 0, and each label
``a`` from ``j`` already on ``i`` becomes a complete observation: its information grows by
``(diag q^- - q^- q^-') / P(a)`` in column ``a`` (``q^-``: ``q_i`` without that label,
``P(a) = sum_y q^-_y C[j, y, a]``), the same Kalman update with ``U = (I - q^- 1')diag(sqrt q^-) / sqrt(P(a))``.

**Point fits** (EM / MAP) have no draws: ``Sigma_j`` is the top-left block of ``[[I_j, A'], [A, 0]]^{-1}``, the
constrained inverse Fisher information, with ``I_j`` the sum over ``j``'s labels of the expected one-label
information above (``q^-``, the item's posterior without that label, in place of ``q_i``; expected rather than
observed, so that the entries of a rarely given label are not left without information) plus one expected complete
observation per row (``diag(1 / C[j, y, :])``, so that the system is regular) and ``A`` the K row-sum constraints.

**Greedy batch.** Score every candidate, take the best, update that item's label branches and that annotator's
``Sigma_j`` (gold: every annotator on the item), rescore what changed, repeat ``budget`` times.

Approximations, and why: linearisation (a plan needs ranks, not exact widths); the two parts add (cross terms are
second order); the prevalences' uncertainty and the new labels' effect on other items through the channels' point
values are left out (one label moves a prevalence by O(1/n_g)); a new label's likelihood uses the posterior mean
channel; the NC-ECE bin weights are fixed during a batch. How the plan compares with random relabelling and with
cleanlab's ActiveLab: docs/planning.md.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd
from scipy.special import erf

from .._validation import _preview, check_choice, check_level, check_positive_int, shared_channels_only
from ..data import AnnotationSet, Binning
from ._posterior import _PER_GROUP_INSTEAD, row_posteriors

KINDS = ("label", "gold")
TARGETS = ("nc_ece", "top_label_nc_ece")
#: Default evaluation bins of the NC-ECE targets (the defaults of ``evaluate``: binary 10, K classes 15).
DEFAULT_BINS = {"nc_ece": 10, "top_label_nc_ece": 15}
#: Most (item x class) entries a target without a JAX gradient is differentiated at by finite differences.
MAX_FINITE_DIFFERENCES = 20_000
#: Most outcome branches kept per item (branches with equal posteriors are merged first).
MAX_BRANCHES = 4096
_FLOOR = 1e-12


@dataclass(frozen=True)
class PlanTarget:
    """A target of :func:`plan_labels`: a function of the clean-label probabilities ``q`` (n_items, n_classes).

    Attributes
    ----------
    name : str
    value : callable ``q -> float``
        The target with the clean labels' indicators replaced by ``q`` (at one-hot ``q`` the sample value).
    gradient : callable ``q -> ndarray (n_items, n_classes)``, optional
        ``df/dq``; default ``jax.grad(value)``, or central finite differences when ``value`` is not JAX-traceable.
    label_weights : callable ``q -> ndarray (n_items, n_classes)``, optional
        The weights ``a_i`` of the label part (module docstring); default the gradient.
    """

    name: str
    value: Callable
    gradient: Callable | None = None
    label_weights: Callable | None = None


@dataclass(frozen=True)
class LabelPlan:
    """A ranked labelling plan (:func:`plan_labels`).

    Attributes
    ----------
    table : DataFrame
        One row per planned action, best first: ``rank``, ``item``, ``annotator`` (empty for a gold check),
        ``action`` (``"label"`` or ``"gold"``), ``gain`` (expected reduction of the target's variance at that step,
        ``label_gain + channel_gain``), ``label_gain``, ``channel_gain``, ``variance_after``, ``width_after``.
    scores : DataFrame
        Every candidate's one-step expected reduction before the batch (``item``, ``annotator``, ``label_gain``,
        ``channel_gain``, ``gain``), best first.
    target : str
    kind : {"label", "gold"}
    budget : int
    value : float
        The target at the clean-label posterior ``q``.
    variance_label, variance_channel : float
        The two parts of the reducible variance before the plan (module docstring).
    width_before, width_after : float
        ``2 z sqrt(variance)`` before the plan and expected after it, at ``level``.
    level : float
    fit_method : str
    """

    table: pd.DataFrame
    scores: pd.DataFrame
    target: str
    kind: str
    budget: int
    value: float
    variance_label: float
    variance_channel: float
    width_before: float
    width_after: float
    level: float
    fit_method: str
    warnings: tuple = field(default=())

    def items(self) -> pd.DataFrame:
        """Per planned item: number of actions and total expected gain, best item first."""
        g = self.table.groupby("item", sort=False).agg(actions=("rank", "size"), gain=("gain", "sum"),
                                                       first_rank=("rank", "min"))
        return g.sort_values("first_rank").reset_index()

    def to_csv(self, path) -> None:
        """Write :attr:`table` (one row per action, best first) as CSV for a labelling team."""
        self.table.to_csv(path, index=False)

    def summary(self) -> str:
        """A few lines: target, budget, width before and expected after."""
        what = "extra labels" if self.kind == "label" else "gold checks"
        return (f"Labelling plan for {self.target} ({self.fit_method} fit): {self.budget} {what}.\n"
                f"Reducible variance: {self.variance_label:.3g} (clean labels) + {self.variance_channel:.3g} "
                f"(channels).\n{self.level:.0%} interval width (sample target, normal approximation): "
                f"{self.width_before:.4f} now, {self.width_after:.4f} expected after the plan.")


# ----------------------------------------------------------------------------------------------- inputs
def _fit_arrays(data, fit, func: str, n_draws=None):
    """``(q (n, K), Cbar (J, K, K), draws (S, J, K, K) or None)`` of a binary or K-class fit."""
    conf = getattr(fit, "confusion", None)
    if conf is None or not hasattr(fit, "clean_label_probability"):
        raise ValueError(f"{func}: `fit` must be a FitResult from fit_em, fit_map or fit_nuts with an estimate; got "
                         f"{type(fit).__name__}" + (" without one (every EM start failed)." if hasattr(
                             fit, "clean_label_probability") else "."))
    shared_channels_only(fit, func, _PER_GROUP_INSTEAD)  # its Kalman gains read one channel per annotator
    binary = getattr(data, "kind", None) == "binary"
    if binary != (fit.n_classes == 2 and getattr(fit, "channel", None) is not None):
        raise ValueError(f"{func}: `data` ({'binary' if binary else 'K classes'}) and `fit` "
                         f"({fit.n_classes} classes) are of different kinds; pass the data the fit was made on.")
    ids = tuple(fit.annotator_ids) or tuple(range(fit.n_annotators))
    if fit.n_annotators != data.n_annotators or (fit.annotator_ids and tuple(data.annotator_ids) != ids):
        raise ValueError(f"{func}: the fit has annotators {_preview(list(ids))} but `data` has "
                         f"{_preview(list(data.annotator_ids))}; pass the data the fit was made on.")
    draws = None
    if binary:
        # the posterior mean over (at most n_draws thinned) draws, without every draw of every item at once
        p = row_posteriors(data, fit, n_draws=n_draws, func=func).item_mean()
        gold = getattr(data, "gold", None)
        if gold is not None:
            p = np.where(np.asarray(gold) >= 0, np.asarray(gold), p)  # a gold item's clean label is known
        q = np.stack([1 - p, p], axis=1)
        if fit.draws is not None:
            fpr = np.asarray(fit.draws["fpr"], np.float64).reshape(-1, data.n_annotators)
            tpr = np.asarray(fit.draws["tpr"], np.float64).reshape(-1, data.n_annotators)
            draws = np.stack([np.stack([1 - fpr, fpr], -1), np.stack([1 - tpr, tpr], -1)], axis=-2)
        cbar = np.asarray(conf, np.float64) if draws is None else draws.mean(axis=0)
    else:
        q = np.asarray(fit.clean_label_probability(data), np.float64)
        c = np.asarray(conf, np.float64)
        if c.ndim == 4:
            draws, cbar = c, c.mean(axis=0)
        else:
            cbar = c
    return np.clip(q, 0.0, 1.0), np.clip(cbar, _FLOOR, 1.0), draws


def _nc_ece_target(data, target: str, bins, func: str) -> PlanTarget:
    """The paper's NC-ECE (binary) or the top-label NC-ECE as a :class:`PlanTarget` (module docstring)."""
    if target == "nc_ece":
        if getattr(data, "kind", None) != "binary":
            raise ValueError(f"{func}: target='nc_ece' is the paper's binary NC-ECE on the scores; for K classes use "
                             "target='top_label_nc_ece' (the default).")
        conf = np.asarray(data.require_scores(), np.float64)
        cls = np.ones(conf.size, np.int64)
    else:
        probs = getattr(data, "probs", None)
        if probs is None:
            raise ValueError(f"{func}: target='top_label_nc_ece' needs the classifier's probabilities in `data`.")
        probs = np.asarray(probs, np.float64)
        conf, cls = probs.max(axis=1), probs.argmax(axis=1)
    binning = Binning.equal_width(bins) if isinstance(bins, (int, np.integer)) and not isinstance(bins, bool) \
        else bins
    if not isinstance(binning, Binning):
        raise ValueError(f"{func}: `bins` must be an int or a Binning; got {bins!r}.")
    edges = np.asarray(binning.edges_for(conf), np.float64)
    idx = np.clip(np.searchsorted(edges, conf, side="right") - 1, 0, edges.size - 2)
    n, n_bins = conf.size, edges.size - 1
    rows = np.arange(n)

    def terms(q):
        qt = q[rows, cls]
        mu = np.bincount(idx, weights=qt - conf, minlength=n_bins) / n
        s = np.sqrt(np.bincount(idx, weights=qt * (1 - qt), minlength=n_bins)) / n
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(s > 0, mu / np.where(s > 0, s, 1.0), np.sign(mu) * np.inf)
        sign = np.where(np.isfinite(t), erf(t / np.sqrt(2)), np.sign(mu))
        phi = np.where(np.isfinite(t), np.exp(-0.5 * np.where(np.isfinite(t), t, 0) ** 2) / np.sqrt(2 * np.pi), 0.0)
        mean_abs = s * np.sqrt(2 / np.pi) * np.exp(-0.5 * np.where(np.isfinite(t), t, 0) ** 2) * np.isfinite(t) \
            + mu * sign
        rho = np.where(s > 0, 1 - 2 * mean_abs * phi / np.where(s > 0, s, 1.0), 1.0)
        return mu, sign, np.clip(rho, 0.0, 1.0)

    def onehot(weights):
        out = np.zeros((n, int(cls.max()) + 1 if target == "top_label_nc_ece" else 2))
        out[rows, cls] = weights
        return out

    def value(q):
        return float(np.abs(terms(np.asarray(q, np.float64))[0]).sum())

    def gradient(q):
        q = np.asarray(q, np.float64)
        g = onehot(terms(q)[1][idx] / n)
        return np.pad(g, ((0, 0), (0, q.shape[1] - g.shape[1])))

    def label_weights(q):
        q = np.asarray(q, np.float64)
        a = onehot(np.sqrt(terms(q)[2][idx]) / n)
        return np.pad(a, ((0, 0), (0, q.shape[1] - a.shape[1])))

    return PlanTarget(target, value, gradient, label_weights)


def _callable_target(f: Callable) -> PlanTarget:
    name = getattr(f, "__name__", "target")
    return PlanTarget(name, lambda q: float(f(q)))


def _gradient(target: PlanTarget, q: np.ndarray, func: str) -> np.ndarray:
    if target.gradient is not None:
        return np.asarray(target.gradient(q), np.float64)
    try:
        import jax
        import jax.numpy as jnp

        from ..core import x64

        with x64():
            return np.asarray(jax.grad(lambda x: jnp.asarray(target.value(x), jnp.float64).sum())(
                jnp.asarray(q, jnp.float64)), np.float64)
    except Exception:  # noqa: BLE001 - not JAX-traceable (NumPy code): finite differences below
        pass
    if q.size > MAX_FINITE_DIFFERENCES:
        raise ValueError(f"{func}: the target is not JAX-traceable and has {q.size} (item x class) entries (> "
                         f"{MAX_FINITE_DIFFERENCES}) to differentiate numerically; write it with jax.numpy or pass a "
                         "PlanTarget with a gradient.")
    h = 1e-6  # central differences: error O(h^2) for smooth targets
    out = np.empty_like(q)
    for idx in np.ndindex(*q.shape):
        up, down = q.copy(), q.copy()
        up[idx] += h
        down[idx] -= h
        out[idx] = (float(target.value(up)) - float(target.value(down))) / (2 * h)
    return out


# ----------------------------------------------------------------------------------------------- label part
def _label_var(w: np.ndarray, Q: np.ndarray, a: np.ndarray) -> float | np.ndarray:
    """``sum_b w_b a'(diag Q_b - Q_b Q_b')a`` over the last-but-one axis of ``Q`` (branches)."""
    v = (Q * a ** 2).sum(-1) - (Q * a).sum(-1) ** 2
    return (w * v).sum(-1)


def _branch(w: np.ndarray, Q: np.ndarray, lik: np.ndarray):
    """Branches after one more label with likelihood ``lik`` (K classes, K labels): ``(w', Q')`` with B*K rows."""
    joint = Q[:, :, None] * lik[None]                                   # (B, y, l)
    p = joint.sum(1)                                                    # (B, l)
    w2 = (w[:, None] * p).ravel()
    Q2 = (joint / np.maximum(p, _FLOOR)[:, None, :]).transpose(0, 2, 1).reshape(-1, Q.shape[1])
    keep = w2 > 0
    w2, Q2 = w2[keep], Q2[keep]
    if w2.size > 1:  # merge equal posteriors (labels in another order)
        _, inv = np.unique(np.round(Q2, 12), axis=0, return_inverse=True)
        inv = inv.ravel()
        wm = np.bincount(inv, weights=w2)
        Qm = np.zeros((wm.size, Q.shape[1]))
        np.add.at(Qm, inv, Q2 * w2[:, None])
        w2, Q2 = wm, Qm / np.maximum(wm, _FLOOR)[:, None]
    if w2.size > MAX_BRANCHES:  # keep the heaviest; renormalise (rare: dozens of labels on one item)
        top = np.argsort(w2)[::-1][:MAX_BRANCHES]
        w2, Q2 = w2[top] / w2[top].sum(), Q2[top]
    return w2, Q2


def _label_gains_all(q, a, cbar, ann):
    """One-step label-part gains of every item x candidate annotator, (n, len(ann)), from the single branch q."""
    joint = q[:, None, :, None] * cbar[None, ann]                       # (n, J, y, l)
    p = joint.sum(2)                                                    # (n, J, l)
    post = joint / np.maximum(p, _FLOOR)[:, :, None, :]                 # (n, J, y, l)
    ai = a[:, None, :, None]
    v_after = (p * ((post * ai ** 2).sum(2) - (post * ai).sum(2) ** 2)).sum(-1)
    v_now = (q * a ** 2).sum(-1) - (q * a).sum(-1) ** 2
    return np.maximum(v_now[:, None] - v_after, 0.0)


# ----------------------------------------------------------------------------------------------- channel part
def _vec(k: int, y, a):
    return y * k + a


def _chain_gradient(q, G, cbar, item, ann, lab, gold_mask):
    """``g_j[y, a] = df/dC[j, y, a]`` (J, K*K) through Bayes' rule (module docstring); gold items do not move."""
    n_ann, k = cbar.shape[0], cbar.shape[1]
    use = ~gold_mask[item]
    i, j, l = item[use], ann[use], lab[use]
    centred = G - (G * q).sum(1, keepdims=True)
    term = q[i] * centred[i] / cbar[j, :, l]                            # (R, K) over y
    g = np.zeros((n_ann, k, k))
    np.add.at(g, (j[:, None], np.arange(k)[None, :], l[:, None]), term)
    return g.reshape(n_ann, k * k)


def _label_u(q, cbar_j):
    """``U`` (N, K*K, K) of one more label on items with clean-label distributions ``q`` (N, K): column ``a`` holds
    ``q_y / sqrt(P(a))`` at ``(y, a)``."""
    n, k = q.shape
    p = np.maximum(q @ cbar_j, _FLOOR)                                  # (N, a)
    u = np.zeros((n, k, k, k))                                          # (N, y, a, column)
    for a in range(k):
        u[:, :, a, a] = q / np.sqrt(p[:, a:a + 1])
    return u.reshape(n, k * k, k)


def _gold_u(q_minus, cbar_j, lab):
    """``U`` (N, K*K, K) of turning the labels ``lab`` (N,) into complete observations: ``(I - q 1')diag(sqrt q) /
    sqrt(P(a))`` in column block ``a`` (module docstring)."""
    n, k = q_minus.shape
    p = np.maximum((q_minus * cbar_j[:, lab].T).sum(1), _FLOOR)         # (N,)
    sq = np.sqrt(q_minus)
    block = (np.eye(k)[None] - q_minus[:, :, None]) * sq[:, None, :] / np.sqrt(p)[:, None, None]  # (N, y, col)
    u = np.zeros((n, k, k, k))
    u[np.arange(n), :, lab, :] = block
    return u.reshape(n, k * k, k)


def _kalman_gain(sigma, g, u):
    """``h'(I + U' Sigma U)^{-1} h`` with ``h = U' Sigma g``: the fall of ``g' Sigma g`` after adding ``U U'`` to the
    information (Woodbury; ``Sigma`` may be singular). ``u`` (N, D, K) -> (N,)."""
    su = np.einsum("de,nek->ndk", sigma, u)
    m = np.einsum("ndk,ndl->nkl", u, su) + np.eye(u.shape[2])[None]
    h = np.einsum("ndk,d->nk", su, g)
    x = np.linalg.solve(m, h[..., None])[..., 0]
    return np.maximum((h * x).sum(1), 0.0)


def _label_channel_gains(sigma, g, q, cbar_j):
    """:func:`_kalman_gain` of one more label on each item (``U`` of :func:`_label_u`), using that column ``a`` of
    ``U`` is zero outside block ``a``: ``U' Sigma U[a, b] = q' Sigma[(., a), (., b)] q / sqrt(P_a P_b)``, cost
    O(n K^4) instead of O(n K^5). ``q`` (n, K) -> (n,)."""
    k = q.shape[1]
    s4 = sigma.reshape(k, k, k, k)                                      # (y, a, z, b)
    root = np.sqrt(np.maximum(q @ cbar_j, _FLOOR))                      # (n, a)
    m = np.einsum("iy,yazb,iz->iab", q, s4, q) / (root[:, :, None] * root[:, None, :]) + np.eye(k)[None]
    h = (q @ (sigma @ g).reshape(k, k)) / root                          # (n, a)
    x = np.linalg.solve(m, h[..., None])[..., 0]
    return np.maximum((h * x).sum(1), 0.0)


def _kalman_update(sigma, u):
    """``Sigma - Sigma U (I + U' Sigma U)^{-1} U' Sigma`` for one ``u`` (D, K)."""
    su = sigma @ u
    m = u.T @ su + np.eye(u.shape[1])
    out = sigma - su @ np.linalg.solve(m, su.T)
    return 0.5 * (out + out.T)


def _leave_one_out(q, cbar, item, ann, lab):
    """``q_i`` without response r's own label, per response (R, K)."""
    qm = q[item] / cbar[ann, :, lab]
    return qm / np.maximum(qm.sum(1, keepdims=True), _FLOOR)


def fisher_covariance(q, cbar, item, ann, lab) -> np.ndarray:
    """Constrained inverse Fisher information of every annotator's confusion matrix, (J, K*K, K*K).

    ``I_j = sum_{r in j} sum_a u_a u_a'`` (the expected one-label information, with the leave-one-out ``q^-`` of
    each label) ``+ diag(1 / C[j, y, a])``
    (one expected complete observation per row), then the top-left block of ``[[I_j, A'], [A, 0]]^{-1}`` with
    ``A`` the row sums (module docstring).
    """
    n_ann, k = cbar.shape[0], cbar.shape[1]
    d = k * k
    qm = _leave_one_out(q, cbar, item, ann, lab)
    info = np.zeros((n_ann, k, k, k))                                   # (j, a, y, z): block of column a
    outer = qm[:, :, None] * qm[:, None, :]
    for a in range(k):  # expected over the label's predictive, as for a new label (observed counts of a rare label
        # are mostly 0 and would leave its entries without information)
        p = np.maximum((qm * cbar[ann, :, a]).sum(1), _FLOOR)
        np.add.at(info[:, a], ann, outer / p[:, None, None])
    full = np.zeros((n_ann, d, d))
    for a in range(k):
        ix = _vec(k, np.arange(k), a)
        full[:, ix[:, None], ix[None, :]] += info[:, a]
    full[:, np.arange(d), np.arange(d)] += 1.0 / cbar.reshape(n_ann, d)
    A = np.zeros((k, d))
    for y in range(k):
        A[y, _vec(k, y, np.arange(k))] = 1.0
    kkt = np.zeros((n_ann, d + k, d + k))
    kkt[:, :d, :d] = full
    kkt[:, :d, d:] = A.T
    kkt[:, d:, :d] = A
    out = np.linalg.inv(kkt)[:, :d, :d]
    return 0.5 * (out + out.transpose(0, 2, 1))


def _draw_covariance(draws) -> np.ndarray:
    s, n_ann, k, _ = draws.shape
    x = draws.reshape(s, n_ann, k * k)
    x = x - x.mean(0)
    return np.einsum("sjd,sje->jde", x, x) / max(s - 1, 1)


# ----------------------------------------------------------------------------------------------- public
def plan_labels(data, fit, *, budget: int, kind: str = "label", target=None, bins=None, annotators=None,
                repeats: bool = True, level: float = 0.9, n_draws: int | None = 1000) -> LabelPlan:
    """Rank where the next labels (or gold checks) narrow the target's interval most, and plan a batch greedily.

    Parameters
    ----------
    data : AnnotationSet (binary, with scores) or MulticlassAnnotationSet (with probabilities)
        The evaluated items, the data ``fit`` was made on.
    fit : FitResult
        ``fit_em`` / ``fit_map`` (a point estimate: channel uncertainty from the Fisher information) or
        ``fit_nuts`` (draws: channel uncertainty from their covariance).
    budget : int
        Number of extra labels (``kind="label"``) or of gold checks (``kind="gold"``) to plan; at least 1.
    kind : {"label", "gold"}, default "label"
        ``"label"``: rank (item, annotator) pairs for one more label each; ``"gold"``: rank items for a gold check
        (an expert's clean label).
    target : {"nc_ece", "top_label_nc_ece"}, PlanTarget or callable, optional
        The quantity whose interval should narrow. Default: ``"nc_ece"`` (the paper's NC-ECE) for binary data,
        ``"top_label_nc_ece"`` for K classes (``"nc_ece"`` is binary only). A callable ``f(q) -> float`` of the
        clean-label probabilities (n_items, n_classes) plugs in any metric (linearised, module docstring).
    bins : int or Binning, optional
        Evaluation bins of the NC-ECE targets (default 10 binary, 15 K classes, equal width).
    annotators : sequence of annotator ids, optional
        ``kind="label"``: who may be asked (default every annotator of the data: only annotators seen in the data
        have a fitted channel).
    repeats : bool, default True
        ``kind="label"``: whether a pair already labelled may be asked again (the model treats a repeat as a
        conditionally independent label). Crowds: set False to ask each annotator only about items new to them.
    level : float, default 0.9
        Level of the reported widths.
    n_draws : int or None, default 1000
        Posterior draws used for the channel covariance of a NUTS fit (evenly thinned; None: all).

    Returns
    -------
    LabelPlan
        ``.table`` (the plan, best first; ``.to_csv(path)``), ``.scores`` (every candidate's one-step gain),
        ``.width_before`` / ``.width_after`` and the variance parts.

    Raises
    ------
    ValueError
        ``budget`` not a positive integer; unknown ``kind`` or ``target``; ``target="nc_ece"`` with K-class data;
        annotators not in the data; a fit of another data set or kind; no candidate left (``repeats=False`` on
        data where every annotator labelled every item).

    Notes
    -----
    Formulas, the preposterior computation, the Kalman update of the channel covariance and the approximations are
    in the module docstring (:mod:`noisycal_bayes.labels.plan`); the benchmark against random relabelling and
    ActiveLab is in docs/planning.md.

    Examples
    --------
    >>> from noisycal_bayes.simulate import simulate_annotations
    >>> from noisycal_bayes.inference import fit_em
    >>> sim = simulate_annotations(300, fpr=[0.1, 0.3, 0.2], tpr=[0.9, 0.7, 0.8], curve="overconfident", seed=1)
    >>> fit = fit_em(sim.data, model="histogram")
    >>> plan = plan_labels(sim.data, fit, budget=20)
    >>> len(plan.table), plan.width_after < plan.width_before
    (20, True)
    """
    func = "plan_labels"
    budget = check_positive_int(budget, name="budget")
    check_choice(kind, KINDS, name="kind", func=func)
    level = check_level(level)
    if n_draws is not None:
        n_draws = check_positive_int(n_draws, name="n_draws")
    if not isinstance(data, AnnotationSet):
        raise ValueError(f"{func}: `data` must be an AnnotationSet or MulticlassAnnotationSet; got "
                         f"{type(data).__name__}.")
    q, cbar, draws = _fit_arrays(data, fit, func, n_draws)
    n, k = q.shape
    n_ann = cbar.shape[0]
    item, ann, lab = (np.asarray(v, np.int64) for v in data.responses)
    gold = getattr(data, "gold", None)
    gold_mask = np.zeros(n, bool) if gold is None else np.asarray(gold) >= 0

    if target is None:
        target = "nc_ece" if data.kind == "binary" else "top_label_nc_ece"
    if isinstance(target, str):
        check_choice(target, TARGETS, name="target", func=func)
        tgt = _nc_ece_target(data, target, DEFAULT_BINS[target] if bins is None else bins, func)
    elif isinstance(target, PlanTarget):
        tgt = target
    elif callable(target):
        tgt = _callable_target(target)
    else:
        raise ValueError(f"{func}: `target` must be one of {TARGETS}, a PlanTarget or a callable f(q); got "
                         f"{target!r}.")
    value = float(tgt.value(q))
    G = _gradient(tgt, q, func)
    a = G if tgt.label_weights is None else np.asarray(tgt.label_weights(q), np.float64)
    if G.shape != q.shape or a.shape != q.shape:
        raise ValueError(f"{func}: the target's gradient must have the shape of q {q.shape}; got {G.shape}.")

    # Channel part: gradient and covariance per annotator.
    g = _chain_gradient(q, G, cbar, item, ann, lab, gold_mask)
    if draws is not None and draws.shape[0] > 1:
        if n_draws is not None and draws.shape[0] > n_draws:
            draws = draws[np.unique(np.linspace(0, draws.shape[0] - 1, n_draws).astype(int))]
        sigma = _draw_covariance(draws)
    else:
        sigma = fisher_covariance(q, cbar, item, ann, lab)
    v_label_items = _label_var(np.ones((n, 1)), q[:, None, :], a[:, None, :])
    var_channel = float(np.einsum("jd,jde,je->", g, sigma, g))
    var_label = float(v_label_items.sum())
    z = float(_normal_quantile((1 + level) / 2))

    item_ids, ann_ids = np.asarray(data.item_ids, dtype=object), np.asarray(data.annotator_ids, dtype=object)
    if kind == "label":
        cand = _candidate_annotators(annotators, data, func)
        table, scores = _greedy_labels(q, a, cbar, sigma, g, v_label_items, cand, budget, repeats, item, ann, func)
    else:
        if annotators is not None:
            raise ValueError(f"{func}: `annotators` chooses who labels (kind='label'); a gold check needs none.")
        table, scores = _greedy_gold(q, a, cbar, sigma, g, v_label_items, gold_mask, budget, item, ann, lab)
    total = var_label + var_channel
    variance_after = total - np.cumsum(table["gain"].to_numpy())
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    table["variance_after"] = np.maximum(variance_after, 0.0)
    table["width_after"] = 2 * z * np.sqrt(table["variance_after"])
    for frame in (table, scores):
        frame["item"] = item_ids[frame["item"].to_numpy(np.int64)]
        if kind == "label":
            frame["annotator"] = ann_ids[frame["annotator"].to_numpy(np.int64)]
    if kind == "gold":
        table["annotator"] = ""
    table["action"] = kind
    table = table[["rank", "item", "annotator", "action", "gain", "label_gain", "channel_gain", "variance_after",
                   "width_after"]]
    warns = ()
    if len(table) < budget:
        warns = (f"only {len(table)} of the {budget} actions could be planned (no candidate left).",)
    return LabelPlan(table=table.reset_index(drop=True), scores=scores, target=tgt.name, kind=kind,
                     budget=budget, value=value, variance_label=var_label, variance_channel=var_channel,
                     width_before=float(2 * z * np.sqrt(total)), width_after=float(table["width_after"].iloc[-1]),
                     level=level, fit_method=str(getattr(fit, "method", "")), warnings=warns)


def _normal_quantile(p: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(p))


def _candidate_annotators(annotators, data, func) -> np.ndarray:
    ids = list(data.annotator_ids)
    if annotators is None:
        return np.arange(len(ids))
    wanted = list(annotators)
    pos = {a: i for i, a in enumerate(ids)}
    unknown = [a for a in wanted if a not in pos]
    if unknown:
        raise ValueError(f"{func}: annotators {_preview(unknown)} are not in the data (known: {_preview(ids)}); only "
                         "annotators with labels in the data have a fitted channel.")
    if not wanted:
        raise ValueError(f"{func}: `annotators` is empty; name at least one annotator of the data.")
    return np.unique([pos[a] for a in wanted])


def _greedy_labels(q, a, cbar, sigma, g, v_items, cand, budget, repeats, item, ann, func):
    n, k = q.shape
    lg = _label_gains_all(q, a, cbar, cand)                              # (n, Jc)
    cg = np.stack([_label_channel_gains(sigma[j], g[j], q, cbar[j]) for j in cand], axis=1)
    allowed = np.ones((n, cand.size), bool)
    if not repeats:
        col = {j: c for c, j in enumerate(cand)}
        for i_, j_ in zip(item, ann):
            if j_ in col:
                allowed[i_, col[j_]] = False
        if not allowed.any():
            raise ValueError(f"{func}: with repeats=False no (item, annotator) pair is left: every candidate annotator "
                             "labelled every item. Allow repeats, or name other annotators.")
    ii, cc = np.nonzero(allowed)
    scores = pd.DataFrame({"item": ii, "annotator": cand[cc], "label_gain": lg[ii, cc], "channel_gain": cg[ii, cc]})
    scores["gain"] = scores["label_gain"] + scores["channel_gain"]
    scores = scores.sort_values("gain", ascending=False, kind="stable").reset_index(drop=True)
    branches: dict = {}
    rows = []
    sigma = sigma.copy()
    for _ in range(budget):
        total = np.where(allowed, lg + cg, -np.inf)
        flat = int(np.argmax(total))
        if not np.isfinite(total.flat[flat]):
            break
        i, c = divmod(flat, cand.size)
        j = int(cand[c])
        rows.append((i, j, float(lg[i, c] + cg[i, c]), float(lg[i, c]), float(cg[i, c])))
        # The item's clean label: one more label from j splits its branches.
        w, Q = branches.get(i, (np.ones(1), q[i:i + 1]))
        w, Q = _branch(w, Q, cbar[j])
        branches[i] = (w, Q)
        v_now = _label_var(w, Q, a[i])
        for c2, j2 in enumerate(cand):
            w2, Q2 = _branch(w, Q, cbar[j2])
            lg[i, c2] = max(v_now - _label_var(w2, Q2, a[i]), 0.0)
        # The annotator's channel: Kalman update, then rescore its column.
        sigma[j] = _kalman_update(sigma[j], _label_u(q[i:i + 1], cbar[j])[0])
        cg[:, c] = _label_channel_gains(sigma[j], g[j], q, cbar[j])
        if not repeats:
            allowed[i, c] = False
    table = pd.DataFrame(rows, columns=["item", "annotator", "gain", "label_gain", "channel_gain"])
    return table, scores


def _greedy_gold(q, a, cbar, sigma, g, v_items, gold_mask, budget, item, ann, lab):
    n, k = q.shape
    qm = _leave_one_out(q, cbar, item, ann, lab)
    sigma = sigma.copy()

    def channel_gains(resp):
        out = np.zeros(resp.size)
        for j in np.unique(ann[resp]):
            sel = resp[ann[resp] == j]
            out[np.searchsorted(resp, sel)] = _kalman_gain(sigma[j], g[j], _gold_u(qm[sel], cbar[j], lab[sel]))
        return out

    resp_all = np.flatnonzero(~gold_mask[item])
    per_resp = np.zeros(item.size)
    per_resp[resp_all] = channel_gains(resp_all)
    lg = np.where(gold_mask, 0.0, v_items)
    cg = np.bincount(item, weights=per_resp, minlength=n)
    allowed = ~gold_mask
    scores = pd.DataFrame({"item": np.flatnonzero(allowed), "label_gain": lg[allowed], "channel_gain": cg[allowed]})
    scores["gain"] = scores["label_gain"] + scores["channel_gain"]
    scores = scores.sort_values("gain", ascending=False, kind="stable").reset_index(drop=True)
    rows = []
    for _ in range(budget):
        total = np.where(allowed, lg + cg, -np.inf)
        i = int(np.argmax(total))
        if not np.isfinite(total[i]):
            break
        rows.append((i, float(lg[i] + cg[i]), float(lg[i]), float(cg[i])))
        allowed[i] = False
        lg[i], cg[i] = 0.0, 0.0
        mine = np.flatnonzero(item == i)
        touched = np.unique(ann[mine])
        for r in mine:
            sigma[ann[r]] = _kalman_update(sigma[ann[r]], _gold_u(qm[r:r + 1], cbar[ann[r]], lab[r:r + 1])[0])
        # Rescore the responses of the touched annotators on items still open.
        resp = np.flatnonzero(np.isin(ann, touched) & allowed[item])
        if resp.size:
            per_resp[resp] = channel_gains(resp)
        per_resp[mine] = 0.0
        cg = np.where(allowed, np.bincount(item, weights=per_resp, minlength=n), 0.0)
    table = pd.DataFrame(rows, columns=["item", "gain", "label_gain", "channel_gain"])
    return table, scores
