r"""Partially pooled (hierarchical) channel models for crowds: many annotators, few labels each.

Each annotator's channel is drawn from a population distribution whose parameters are learned, in
non-centred form (so that an annotator with 20 labels costs the sampler no funnel):

.. math::

    \operatorname{logit} fpr_j = \mu_f + \sigma_f z_{fj}, \qquad
    \operatorname{logit} tpr_j = \mu_t + \sigma_t z_{tj}, \qquad z_{fj}, z_{tj} \sim N(0, 1),

with ``mu_tpr = mu_fpr + mean_gap``. Sites and priors (numbers from :class:`~noisycal_bayes.models.Prior`):

==================  ==========================================  =======================================
site                prior                                       meaning
==================  ==========================================  =======================================
``mu_fpr``          ``Normal(*prior.population_fpr)``           population median fpr, logit scale
``mean_gap``        ``HalfNormal(prior.population_gap)``        ``mu_tpr - mu_fpr`` > 0 (orientation)
``sigma_fpr``,      ``HalfNormal(prior.population_spread)``     spread of logit fpr / logit tpr
``sigma_tpr``
``z_fpr, z_tpr``    ``Normal(0, 1)`` per annotator              standardised channel of annotator j
prevalence part     as the non-pooled model of the same name    ``"dawid_skene"``, ``"grouped"``, ...
==================  ==========================================  =======================================

``mean_gap > 0`` orients the crowd as a whole (paper Appendix D.5, DESIGN §8) and leaves every annotator free: a
spammer or an adversary is estimated with its interval, not rejected. The likelihood is computed from sparse
responses in O(n_responses) (:func:`noisycal_bayes.core.sparse.code_sums`), gold items contributing ``log P(Y_i =
gold_i, A_i)``. :func:`pooled_multiclass` is the K-class model: ``log(C[j,y,a] / C[j,y,y]) = mu_{y,a} + sigma
z_{j,y,a}`` with one spread. Why this orientation, the likelihood and the preconditioning of NUTS: docs/methods.md.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro
import numpy as np
import numpyro.distributions as dist
from numpyro.distributions.transforms import AffineTransform, biject_to

from ..core.likelihood import tiny_log
from ..core.sparse import channel_tables, code_sums, response_codes
from .dawid_skene import add_class_likelihood, group_prevalence
from .log_ratio import insert_diagonal_zero
from .priors import DEFAULT_MULTICLASS_PRIOR, DEFAULT_PRIOR, Prior

_EPS = 1e-12  # prevalence kept off {0, 1} before its log (as core.sparse)


#: The prevalence structures a pooled channel model can be combined with (same names as ``model=``).
POOLED_KINDS = ("dawid_skene", "grouped", "histogram", "monotone", "platt")
#: Sample sites of the population (hyper-)parameters, in the order results report them.
POPULATION_SITES = ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")
#: Suffix of a preconditioned site (``precond``): ``name + PRECOND_SUFFIX`` is sampled, ``name`` is deterministic.
PRECOND_SUFFIX = "_pre"
#: The support of each site that can be preconditioned (its unconstrained coordinate: identity, log, logit).
SITE_SUPPORTS = {"mu_fpr": "real", "mean_gap": "positive", "sigma_fpr": "positive", "sigma_tpr": "positive",
                 "z_fpr": "real", "z_tpr": "real", "prevalence": "unit", "slope": "real", "intercept": "real"}


def _site(name, fn, precond):
    """``numpyro.sample(name, fn)``; with ``(shift, scale) = precond[name]``, the site is sampled as
    ``v = (T^-1(x) - shift) / scale`` instead (``T`` the sampler's own map from the real line onto ``fn``'s support)
    and ``x = T(shift + scale v)`` recorded under ``name``.

    An affine change of the sampler's unconstrained coordinate (its log-Jacobian, ``sum log scale``, is a
    constant): the distribution of ``x`` is unchanged. With ``shift`` at the start and ``scale`` near the posterior
    standard deviation, NUTS' first warm-up window (identity mass matrix) starts well scaled
    (:func:`posterior_scales`).
    """
    if precond is None or name not in precond:
        return numpyro.sample(name, fn)
    shift, scale = precond[name]
    to_support = biject_to(fn.support)
    affine = AffineTransform(shift, scale)
    v = numpyro.sample(name + PRECOND_SUFFIX, dist.TransformedDistribution(fn, [to_support.inv, affine.inv]))
    return numpyro.deterministic(name, to_support(affine(v)))


def pooled_channels(n_annotators: int, prior: Prior, centering=None, precond=None):
    """Sample the population and the annotators' channels; expose ``fpr``, ``tpr``, ``gap``, ``u``.

    Returns ``(logit_fpr, logit_tpr)``, each of shape (n_annotators,). ``u = gap / (1 - fpr)`` is recorded so
    that the draws read like the non-pooled models' (it is negative for an adversarial annotator).

    ``centering`` (float array of shape (2, n_annotators) in [0, 1], or None = all 0) sets how centred each
    annotator's site is (partial centring, Papaspiliopoulos, Roberts & Skold 2007; NumPyro's
    ``LocScaleReparam``): with ``c`` the annotator's value, ``z ~ N(c mu, sigma^c)`` and
    ``logit r = mu + sigma^(1 - c) (z - c mu)``, which is the non-centred form at ``c = 0`` (``z ~ N(0, 1)``)
    and the centred one at ``c = 1`` (``z = logit r``). The distribution of the rates is the same for every
    ``c``; only the sampler's geometry changes (``noisycal_bayes.inference._common.partial_centering``).

    ``precond`` (dict of site name -> ``(shift, scale)``, or None) samples those sites in shifted and scaled
    unconstrained coordinates (:func:`_site`; same distribution).
    """
    loc, scale = prior.population_fpr
    mu_f = _site("mu_fpr", dist.Normal(loc, scale), precond)
    # mean_gap > 0 is the crowd-level orientation constraint (module docstring): built into the support.
    mean_gap = _site("mean_gap", dist.HalfNormal(prior.population_gap), precond)
    sigma_f = _site("sigma_fpr", dist.HalfNormal(prior.population_spread), precond)
    sigma_t = _site("sigma_tpr", dist.HalfNormal(prior.population_spread), precond)
    mu_t = mu_f + mean_gap
    if centering is None:
        with numpyro.plate("annotator", n_annotators):
            z_f = _site("z_fpr", dist.Normal(0.0, 1.0), precond)
            z_t = _site("z_tpr", dist.Normal(0.0, 1.0), precond)
        lf, lt = mu_f + sigma_f * z_f, mu_t + sigma_t * z_t
    else:
        # In the sites' dtype: a float64 constant with float32 sites (x64 off) would not combine in lax.
        c = jnp.asarray(centering, jnp.result_type(mu_f))
        c_f, c_t = c[0], c[1]
        # sigma^c as exp(c log sigma): finite gradient at c = 0 (sigma^0 = 1 for every sigma > 0).
        with numpyro.plate("annotator", n_annotators):
            z_f = _site("z_fpr", dist.Normal(c_f * mu_f, jnp.exp(c_f * jnp.log(sigma_f))), precond)
            z_t = _site("z_tpr", dist.Normal(c_t * mu_t, jnp.exp(c_t * jnp.log(sigma_t))), precond)
        lf = mu_f + jnp.exp((1 - c_f) * jnp.log(sigma_f)) * (z_f - c_f * mu_f)
        lt = mu_t + jnp.exp((1 - c_t) * jnp.log(sigma_t)) * (z_t - c_t * mu_t)
    fpr = numpyro.deterministic("fpr", jax.nn.sigmoid(lf))
    tpr = numpyro.deterministic("tpr", jax.nn.sigmoid(lt))
    gap = numpyro.deterministic("gap", tpr - fpr)
    numpyro.deterministic("u", gap / (1 - fpr))
    return lf, lt


def _prevalence(kind: str, n_groups: int, prior: Prior, logit_score, precond=None):
    """Clean-label probability per prevalence cell: (n_groups,), or (n_items,) for Platt (per item)."""
    if kind == "dawid_skene":
        return _site("prevalence", dist.Beta(*prior.prevalence), precond)[None]
    if kind in ("grouped", "histogram"):
        with numpyro.plate("group" if kind == "grouped" else "bin", n_groups):
            return _site("prevalence", dist.Beta(*prior.prevalence), precond)
    if kind == "monotone":
        inc = numpyro.sample("increments", dist.Dirichlet(jnp.full(n_groups + 1, prior.increments)))
        return numpyro.deterministic("prevalence", jnp.cumsum(inc)[:-1])
    slope = _site("slope", dist.Normal(*prior.slope), precond)
    intercept = _site("intercept", dist.Normal(*prior.intercept), precond)
    return jax.nn.sigmoid(slope * logit_score + intercept)


def pooled_model(item, annotator, label=None, item_group=None, gold=None, logit_score=None, padded=None,
                 code_counts=None, centering=None, precond=None, *, kind: str, n_items: int, n_annotators: int,
                 n_groups: int = 1, prior: Prior = DEFAULT_PRIOR, record_loglik: bool = False):
    """Partially pooled channels with the prevalence structure ``kind`` (module docstring).

    Parameters
    ----------
    item, annotator : int arrays of shape (n_responses,)
        Who labelled what (:attr:`noisycal_bayes.data.AnnotationSet.responses`), sorted by item.
    label : int array of shape (n_responses,) or None
        The responses (0/1). None samples the prior predictive: ``y`` of shape (n_items,) and ``labels``
        of shape (n_responses,), one per (item, annotator) entry given.
    item_group : int array of shape (n_items,)
        Prevalence group (score bin) of each item, in ``0..n_groups-1`` (zeros for ``"dawid_skene"``;
        ignored by ``"platt"``).
    gold : int array of shape (n_items,) or None
        Known clean label per item (0/1), -1 where unknown; None when there are none.
    logit_score : float array of shape (n_items,) or None
        ``logit(z_i)``, clipped (Platt only).
    padded : int array of shape (n_items, L) or None
        The responses' codes ``2 j + A`` per item (:func:`noisycal_bayes.core.sparse.padded_codes`); None sums
        over the responses by a segment sum. Either gives the same numbers.
    code_counts : float array of shape (2 n_annotators,) or None
        Number of responses per code (computed when None).
    centering : float array of shape (2, n_annotators) or None
        Partial centring of the fpr / tpr sites (:func:`pooled_channels`); None is the non-centred form.
    precond : dict of site name -> (shift, scale), or None
        Sample these sites in shifted and scaled unconstrained coordinates, ``name + PRECOND_SUFFIX``
        (:func:`_site`, :func:`posterior_scales`): the same model; NUTS' warm-up starts well scaled.
    kind : {"dawid_skene", "grouped", "histogram", "monotone", "platt"}
    n_items, n_annotators, n_groups : int
        Static sizes.
    prior : Prior or PriorParams
        Uses ``population_fpr``, ``population_gap``, ``population_spread`` and the prevalence part's fields.
    record_loglik : bool
        Add a deterministic site ``log_likelihood`` of shape (n_items,).

    Notes
    -----
    ``log p(A | theta) = sum_i logaddexp(log(1 - pi_i) + l0_i, log pi_i + l1_i)`` with ``pi_i`` the
    prevalence of item i's group (Platt: ``sigmoid(slope logit z_i + intercept)``); paper Appendix F.1
    with the per-item prior of the calibration-curve models. Computed as ``sum_k n_k L0[k] + sum_i
    logaddexp(log(1 - pi_i), log pi_i + x_i)`` with one per-item sum ``x_i = l1_i - l0_i`` of a per-code table
    (:func:`noisycal_bayes.core.sparse.channel_tables`); gold items keep only their known label's term.
    """
    if kind not in POOLED_KINDS:
        raise ValueError(f"`kind` must be one of {list(POOLED_KINDS)}; got {kind!r}.")
    lf, lt = pooled_channels(n_annotators, prior, centering, precond)
    prob = _prevalence(kind, n_groups, prior, logit_score, precond)
    # Platt has one clean-label probability per item: each item is its own "group".
    group = jnp.arange(n_items) if kind == "platt" else item_group
    if label is None:
        fpr, tpr = jax.nn.sigmoid(lf), jax.nn.sigmoid(lt)
        with numpyro.plate("item", n_items):
            y = numpyro.sample("y", dist.Bernoulli(probs=prob[group]))
        rate = jnp.where(y[item] == 1, tpr[annotator], fpr[annotator])
        with numpyro.plate("response", item.shape[0]):
            return numpyro.sample("labels", dist.Bernoulli(probs=rate))
    code = response_codes(annotator, label)
    if code_counts is None:
        code_counts = jax.ops.segment_sum(jnp.ones(code.shape[0], lf.dtype), code, num_segments=2 * n_annotators)
    code_counts = jnp.asarray(code_counts, lf.dtype)
    l0_table, w_table = channel_tables(lf, lt)
    if padded is not None and padded.shape[-1] == 0:
        padded = None  # pooled_inputs' marker for "sum by segments" (shapes are static under tracing)
    x = code_sums(w_table, code, item, n_items, padded)
    p = jnp.clip(prob, _EPS, 1 - _EPS)[group]
    a, b = jnp.log1p(-p), jnp.log(p) + x
    if gold is not None:
        # Observed latent label: only the known class's term (l0_i is common to both and added below).
        a = jnp.where(gold == 1, -jnp.inf, a)
        b = jnp.where(gold == 0, -jnp.inf, b)
    rel = jnp.logaddexp(a, b)
    if record_loglik:
        numpyro.deterministic("log_likelihood", rel + code_sums(l0_table, code, item, n_items, padded))
    # sum_i l0_i = sum_k n_k L0[k]: the responses' counts per code carry it (module notes of core.sparse).
    numpyro.factor("responses", jnp.sum(code_counts * l0_table) + jnp.sum(rel))
    return None


def population_confusion(mu):
    """The population's typical confusion ``softmax([0 at y, mu_y])`` per row, from ``mu`` (..., K, K-1)."""
    return jax.nn.softmax(insert_diagonal_zero(jnp.asarray(mu)), axis=-1)


def pooled_multiclass(table, *, n_annotators: int, n_classes: int, n_groups: int = 1,
                      prior=DEFAULT_MULTICLASS_PRIOR, record_loglik: bool = False):
    """K-class Dawid-Skene with partially pooled confusion matrices (many annotators, few labels each).

    ``log(C[j,y,a] / C[j,y,y]) = mu_{y,a} + sigma z_{j,y,a}`` (non-centred; docs/methods.md, "K classes"),
    prevalence per group as :func:`grouped_multiclass` (``n_groups = 1``: one prevalence).

    Sites: ``mu`` (K, K-1), ``sigma`` (), ``z`` (J, K, K-1), ``prevalence`` (G, K); deterministic
    ``confusion`` (J, K, K) and ``population_confusion`` (K, K).
    """
    k = n_classes
    mu = numpyro.sample("mu", dist.Normal(prior.population_loc, prior.population_scale).expand([k, k - 1]).to_event(2))
    sigma = numpyro.sample("sigma", dist.HalfNormal(prior.population_spread))
    z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([n_annotators, k, k - 1]).to_event(3))
    eta = insert_diagonal_zero(mu + sigma * z, jnp)
    # log-softmax directly: the log confusion without an exp / log round trip.
    log_conf = jax.nn.log_softmax(eta, axis=-1)
    numpyro.deterministic("confusion", jnp.exp(log_conf))
    numpyro.deterministic("population_confusion", population_confusion(mu))
    prevalence = group_prevalence(n_groups, k, prior)
    add_class_likelihood(table, log_conf, tiny_log(prevalence), record_loglik)


# ---------------------------------------------------------------------------------------------------------------
# Preconditioning for NUTS (NumPy): where each site starts and how wide its posterior is, in the sampler's
# unconstrained coordinates.
#
# Why: the identity mass matrix of NumPyro's first warm-up window meets posterior standard deviations that
# span two orders of magnitude (docs/methods.md, preconditioning for NUTS).


# Support -> (to the sampler's unconstrained coordinates, back); a real site is its own coordinate.
_TRANSFORMS = {"positive": (np.log, np.exp),
               "unit": (lambda x: np.log(x) - np.log1p(-x), lambda u: 1.0 / (1.0 + np.exp(-u)))}


def _to_unconstrained(support: str, x):
    x = np.asarray(x, np.float64)
    return _TRANSFORMS[support][0](x) if support in _TRANSFORMS else x


def _from_unconstrained(support: str, u):
    u = np.asarray(u, np.float64)
    return _TRANSFORMS[support][1](u) if support in _TRANSFORMS else u


def posterior_scales(start: dict, centering, *, n0, n1, item_posterior, item_group, n_groups: int, kind: str,
                     prior: Prior = DEFAULT_PRIOR, logit_score=None) -> dict:
    """``precond`` for :func:`pooled_model`: site name -> ``(shift, scale)`` in the sampler's unconstrained
    coordinates, ``shift`` the start and ``scale`` a normal approximation of the posterior standard deviation.

    Parameters
    ----------
    start : dict of site name -> array
        Constrained start values (``inference._common.pooled_start``), ``z`` sites in the parametrisation of
        ``centering``.
    centering : float array of shape (2, n_annotators)
        The partial centring the sites are sampled in (:func:`pooled_channels`).
    n0, n1 : float arrays of shape (n_annotators,)
        Soft counts of each annotator's labels on negative and on positive items (from the start's EM).
    item_posterior : float array of shape (n_items,)
        ``P(Y_i = 1 | A)`` at the start (the gold label on gold items).
    item_group : int array of shape (n_items,)
        Prevalence group of each item.
    n_groups : int
    kind : str
        A :data:`POOLED_KINDS` name; ``"monotone"``'s increments are not preconditioned.
    prior : Prior
    logit_score : float array of shape (n_items,) or None
        Platt only.

    Returns
    -------
    dict of name -> (shift, scale), NumPy float64 arrays shaped like the site.

    Notes
    -----
    With ``I_j = n_j r_j (1 - r_j)`` the Fisher information about ``logit r_j`` and ``sigma`` the population
    spread: the site of centring ``c`` (``c mu + sigma^c z``) has sd ``sigma^c / sqrt(1 + sigma^2 I_j)``; ``mu``
    has precision ``sum_j 1 / (sigma^2 + 1 / I_j)`` plus the prior's; ``log mean_gap`` the sd of
    ``mu_tpr - mu_fpr`` over ``mean_gap``; ``log sigma`` precision ``1 + 2 sum_j w_j^2`` with
    ``w_j = sigma^2 I_j / (1 + sigma^2 I_j)`` (a normal hierarchy's information about ``log sigma``, plus one for
    the prior); ``logit pi_g`` precision ``1 + sum_{i in g} (T_i - pi_g)^2`` (the observed information of a
    mixture weight); Platt's slope and intercept the diagonal of the inverse of ``sum_i (T_i - p_i)^2 x_i x_i'``
    plus the prior precision, ``x_i = (logit z_i, 1)``. Only the sampler's speed depends on these numbers.
    """
    out = {}
    c = np.asarray(centering, np.float64)
    mu = {"fpr": float(start["mu_fpr"])}
    mu["tpr"] = mu["fpr"] + float(start["mean_gap"])
    var_mu = {}
    counts = {"fpr": np.asarray(n0, np.float64), "tpr": np.asarray(n1, np.float64)}
    spread_info = {}
    for row, name in enumerate(("fpr", "tpr")):
        sigma = float(start[f"sigma_{name}"])
        site = np.asarray(start[f"z_{name}"], np.float64)
        logit = mu[name] + sigma ** (1 - c[row]) * (site - c[row] * mu[name])
        r = 1.0 / (1.0 + np.exp(-logit))
        info = np.maximum(counts[name], 0.0) * r * (1 - r)
        out[f"z_{name}"] = (site, sigma ** c[row] / np.sqrt(1 + sigma ** 2 * info))
        # 1 / (sigma^2 + 1 / I) written as I / (1 + sigma^2 I): finite where I = 0.
        prec_mu = np.sum(info / (1 + sigma ** 2 * info))
        var_mu[name] = 1.0 / (prec_mu + 1.0 / prior.population_fpr[1] ** 2)
        w = sigma ** 2 * info / (1 + sigma ** 2 * info)
        spread_info[name] = 1.0 + 2.0 * np.sum(w ** 2)
    out["mu_fpr"] = (np.float64(mu["fpr"]), np.sqrt(var_mu["fpr"]))
    gap = float(start["mean_gap"])
    out["mean_gap"] = (np.log(gap), min(np.sqrt(var_mu["fpr"] + var_mu["tpr"]) / gap, 1.0))
    for name in ("fpr", "tpr"):
        out[f"sigma_{name}"] = (np.log(float(start[f"sigma_{name}"])), 1.0 / np.sqrt(spread_info[name]))
    t = np.asarray(item_posterior, np.float64)
    if kind in ("dawid_skene", "grouped", "histogram"):
        prev = np.atleast_1d(np.asarray(start["prevalence"], np.float64))
        g = np.zeros(t.size, np.int64) if kind == "dawid_skene" else np.asarray(item_group, np.int64)
        info = np.bincount(g, weights=(t - prev[g]) ** 2, minlength=n_groups if kind != "dawid_skene" else 1)
        scale = 1.0 / np.sqrt(1.0 + info)
        shift = _to_unconstrained("unit", prev)
        if kind == "dawid_skene":
            shift, scale = shift.reshape(()), scale.reshape(())
        out["prevalence"] = (shift, scale)
    elif kind == "platt":
        x = np.stack([np.asarray(logit_score, np.float64), np.ones(t.size)], axis=1)
        p = 1.0 / (1.0 + np.exp(-(x @ np.array([float(start["slope"]), float(start["intercept"])]))))
        info = (x * ((t - p) ** 2)[:, None]).T @ x + np.diag([prior.slope[1] ** -2, prior.intercept[1] ** -2])
        sd = np.sqrt(np.diag(np.linalg.inv(info)))
        out["slope"] = (np.float64(start["slope"]), sd[0])
        out["intercept"] = (np.float64(start["intercept"]), sd[1])
    # Guard rails: a scale far outside the posterior's would only slow the warm-up, never change the model.
    return {k: (np.asarray(m, np.float64), np.clip(np.asarray(s, np.float64), 1e-4, 10.0)) for k, (m, s) in out.items()}


def precondition_start(start: dict, precond: dict) -> dict:
    """Constrained start values of :func:`pooled_model`'s sample sites with ``precond``: ``name + PRECOND_SUFFIX``
    holds ``(T^-1(x) - shift) / scale`` for each preconditioned site (0 where ``shift`` is the start)."""
    out = {}
    for name, value in start.items():
        if name in precond:
            shift, scale = precond[name]
            out[name + PRECOND_SUFFIX] = (_to_unconstrained(SITE_SUPPORTS[name], value) - shift) / scale
        else:
            out[name] = np.asarray(value)
    return out


def unprecondition_draws(draws: dict, precond: dict) -> dict:
    """The draws of :func:`pooled_model`'s sample sites under the original names: ``name + PRECOND_SUFFIX``
    (any leading dims) mapped back by ``x = T(shift + scale v)``. Inverse of :func:`precondition_start`."""
    out = {}
    for key, value in draws.items():
        name = key[:-len(PRECOND_SUFFIX)] if key.endswith(PRECOND_SUFFIX) else None
        if name is not None and name in precond:
            shift, scale = precond[name]
            out[name] = _from_unconstrained(SITE_SUPPORTS[name], shift + scale * np.asarray(value, np.float64))
        else:
            out[key] = np.asarray(value)
    return out
