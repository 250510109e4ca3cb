"""Helpers shared by fit_map and fit_nuts (and their K-class forms): model binding, start values, unconstrained
transforms, draws back in the model's terms."""
from __future__ import annotations

import functools
import inspect

import jax
import numpy as np

from .._validation import binary_only
from ..core.em import expected_class_counts
from ..core.likelihood import softmax_rows
from ..core.starts import diagonally_dominant
from ..data import AnnotationSet, Binning, SufficientStats
from ..models import MODELS, MULTICLASS_MODELS
from ..models.log_ratio import grouped_multiclass_log_ratio, insert_diagonal_zero, log_ratio_point


# Keep starting values off the boundary, where the unconstrained coordinates are infinite.
_CLIP = (1e-3, 1 - 1e-3)


def bound_model(model: str, static: dict):
    """The model function with static sizes bound and the prior taken as the last positional argument.

    The prior then travels as a traced pytree (``Prior.params()``), so one compiled program serves every
    prior.
    """
    fn = MODELS[model]

    def bound(*args):
        *data, prior = args
        return fn(*data, prior=prior, **static)

    bound.__name__ = f"{model}_bound"
    return bound


def sample_sites(model: str, point: dict, n_groups: int) -> dict:
    """Constrained values of the model's sample sites from a point estimate (clipped off the boundary)."""
    fpr = np.clip(np.asarray(point["fpr"], dtype=np.float64), *_CLIP)
    tpr = np.clip(np.asarray(point["tpr"], dtype=np.float64), *_CLIP)
    tpr = np.maximum(tpr, fpr + 1e-3)
    u = np.clip((tpr - fpr) / (1 - fpr), *_CLIP)
    out = {"fpr": fpr, "u": u}
    if model == "platt":
        out["slope"] = np.float64(point["slope"])
        out["intercept"] = np.float64(point["intercept"])
        return out
    prev = np.clip(np.asarray(point["prevalence"], dtype=np.float64), *_CLIP)
    if model == "monotone":
        prev = np.sort(np.atleast_1d(prev))
        inc = np.diff(np.concatenate([[0.0], prev, [1.0]]))
        # Ties in the start would put an increment at 0 (the boundary of the simplex).
        inc = np.maximum(inc, 1e-3)
        out["increments"] = inc / inc.sum()
        return out
    out["prevalence"] = prev.reshape(()) if model == "dawid_skene" else prev.reshape(n_groups)
    return out


def with_derived(model: str, sites: dict) -> dict:
    """Add ``tpr``, ``gap`` (and ``prevalence`` for the monotone model) to constrained sample-site values."""
    out = {k: np.asarray(v, dtype=np.float64) for k, v in sites.items()}
    out["gap"] = (1 - out["fpr"]) * out["u"]
    out["tpr"] = out["fpr"] + out["gap"]
    if model == "monotone":
        out["prevalence"] = np.cumsum(out["increments"], axis=-1)[..., :-1]
    return out


# ------------------------------------------------------------------ partially pooled channels
#: ``pooling=`` values of fit_nuts / fit_map: independent channels with every gap > 0 (the paper's model), or
#: channels drawn from a learned population with the orientation fixed at the crowd's level.
POOLINGS = ("none", "partial")
# The pooled start is kept this far inside (0, 1): near-perfect annotators or a score group with prevalence
# near 0 or 1 would otherwise put it at +-inf in the sampler's unconstrained coordinates.
_POOLED_CLIP = (0.02, 0.98)
# Beta(2, 2) pseudo-counts in the start's EM: the same bound, from the data's side (no estimate at 0 or 1).
_START_COUNTS = ((2.0, 2.0), (2.0, 2.0), (2.0, 2.0))


def check_pooling(pooling, model: str, func: str) -> str:
    """``pooling`` validated: "none" or "partial" (every model supports both)."""
    if pooling not in POOLINGS:
        raise ValueError(f"{func}: `pooling` must be one of {list(POOLINGS)}; got {pooling!r}. Use 'partial' for "
                         "crowds (many annotators, spammers, adversaries), 'none' for a few trusted annotators.")
    return pooling


#: Positions in ``pooled_inputs``' ``args`` (the positional arguments of ``pooled_model``).
ARG_GOLD, ARG_CENTERING = 4, 8


def pooled_inputs(data, model: str, assignment, *, centered: bool = False):
    """``(args, static)`` of :func:`~noisycal_bayes.models.pooled_model` for ``data`` (no dense array built).

    ``args = (item, annotator, label, item_group, gold, logit_score, padded, code_counts, centering)`` as NumPy
    arrays: ``gold`` all -1 when the data has none; ``logit_score`` zeros unless Platt; ``padded`` the codes
    per item (:func:`~noisycal_bayes.core.sparse.padded_codes`) or, when padding would more than double the
    responses, a (n_items, 0) array and the model sums by segments (``static["layout"]`` says which);
    ``code_counts`` the responses per code; ``centering`` (2, n_annotators): zeros (the non-centred form, the
    one whose mode ``fit_map`` reports), or with ``centered=True`` the sampler's partial centring from the
    start's soft counts (:func:`partial_centering`). ``static`` holds the compile-time sizes.
    """
    from ..core import clipped_logit
    from ..core.sparse import padded_codes

    item, annotator, label = data.responses
    n, n_ann = data.n_items, data.n_annotators
    gold = np.full(n, -1, np.int32) if data.gold is None else np.asarray(data.gold, np.int32)
    if model == "platt":
        logit_score = np.asarray(clipped_logit(data.require_scores()), dtype=np.float64)
    else:
        logit_score = np.zeros(n)
    item, annotator, label = np.asarray(item, np.int32), np.asarray(annotator, np.int32), np.asarray(label, np.int32)
    code = 2 * annotator + label
    padded = padded_codes(item, code, n, 2 * n_ann)
    counts = np.bincount(code, minlength=2 * n_ann).astype(np.float64)
    args = [item, annotator, label, np.asarray(assignment.index, np.int32), gold, logit_score,
            np.zeros((n, 0), np.int32) if padded is None else padded, counts, np.zeros((2, n_ann))]
    static = {"kind": model, "n_items": n, "n_annotators": n_ann, "n_groups": assignment.n_groups}
    if centered:
        args[ARG_CENTERING] = start_centering(tuple(args), static)
    return tuple(args), static


def pooled_fit_inputs(data, model: str, assignment):
    """The ``FitResult.inputs`` of a pooled fit: the model's compressed inputs with the data's gold labels attached
    (``inputs.gold``), so that ``log_likelihood`` and ``clean_label_probability`` treat gold items as observed
    latent labels, as the pooled likelihood does.

    With repeated (item, annotator) labels, which no pattern row can hold, the grouped models get the responses
    themselves (:func:`~noisycal_bayes.models.inputs.sparse_inputs`, gold attached): the same per-item likelihood
    the pooled model sums, every repeated label a factor of its own."""
    import dataclasses

    from ..models.inputs import prepare_inputs, sparse_inputs

    if getattr(data, "has_repeats", False) and model != "platt":
        return sparse_inputs(data, model, assignment)
    inputs = prepare_inputs(data, model, assignment)
    gold = getattr(data, "gold", None)
    if gold is None or not np.any(np.asarray(gold) >= 0):
        return inputs
    return dataclasses.replace(inputs, gold=np.asarray(gold, np.int8))


def partial_centering(logit_rate, n_eff, sigma):
    """How centred each annotator's site should be: ``c = sigma^2 I / (1 + sigma^2 I)``, shape like ``logit_rate``.

    ``I = n_eff r (1 - r)`` is the Fisher information about ``logit r`` from ``n_eff`` (soft) labels and
    ``sigma`` the population spread (logit scale). In a normal hierarchy ``c`` is the weight of the data in the
    annotator's posterior mean, and the centring that makes the sampled site a posteriori uncorrelated with
    ``(mu, sigma)`` (Papaspiliopoulos, Roberts & Skold 2007; Gelman et al. 2008): an annotator with 2 labels
    stays non-centred (``c ~ 0``: no funnel), one with 500 labels centred (``c ~ 1``: its data no longer tie its
    site to ``mu`` and ``sigma``). Any value in [0, 1] gives the same model (:func:`~noisycal_bayes.models.
    pooled_channels`); only NUTS' step size and tree depth change.
    """
    r = _sigmoid(logit_rate)
    info = np.asarray(n_eff, np.float64) * r * (1 - r) * float(sigma) ** 2
    return info / (1 + info)


def start_centering(args, static: dict):
    """The sampler's ``centering`` (2, n_annotators) from the start's EM: :func:`partial_centering` of fpr with
    the soft count of each annotator's labels on negative items, tpr with those on positive items, at the
    start's population spreads."""
    fpr, tpr, _, post = _start_em(args, static)
    item, annotator = args[0], args[1]
    n_ann = static["n_annotators"]
    n1 = np.bincount(annotator, weights=post[item], minlength=n_ann)
    n0 = np.bincount(annotator, minlength=n_ann) - n1
    lf, lt = _logit(fpr), _logit(tpr)
    s_f, s_t = max(float(np.std(lf)), 0.2), max(float(np.std(lt)), 0.2)
    return np.stack([partial_centering(lf, n0, s_f), partial_centering(lt, n1, s_t)])


def _logit(p):
    return np.log(p / (1 - p))


def pooled_bound(static: dict):
    """:func:`~noisycal_bayes.models.pooled_model` with static sizes bound, the prior as the last argument."""
    from ..models import pooled_model

    def bound(*args):
        *data, prior = args
        return pooled_model(*data, prior=prior, **static)

    bound.__name__ = f"pooled_{static['kind']}_bound"
    return bound


_START_PROGRAMS: dict = {}


def _start_em(args, static: dict, n_iter: int = 50):
    """``(fpr, tpr, prevalence, posterior)`` of the bounded start's EM (:func:`pooled_start`), rates clipped to
    ``[0.02, 0.98]``; the compiled loop is kept per ``(n_groups, n_annotators, n_iter)``."""
    import jax
    import jax.numpy as jnp

    from ..core import x64
    from ..core.sparse import sparse_e_step, sparse_m_step
    from ..core.tables import Responses

    item, annotator, label, item_group, gold = args[:5]
    n, n_ann = static["n_items"], static["n_annotators"]
    kind = static["kind"]
    n_groups = 1 if kind == "platt" else static["n_groups"]
    group = np.zeros(n, np.int32) if kind == "platt" else item_group
    votes = np.bincount(item, weights=label, minlength=n) / np.maximum(np.bincount(item, minlength=n), 1)
    t0 = np.where(gold >= 0, gold, votes)
    key = (n_groups, n_ann, n_iter)
    run = _START_PROGRAMS.get(key)
    if run is None:
        def run(resp, grp, gd, t):
            def body(_, t):
                f, tp, p = sparse_m_step(resp, grp, n_groups, n_ann, t, prior=_START_COUNTS)
                return sparse_e_step(resp, grp, f, tp, p, gold=gd)[1]

            t = jax.lax.fori_loop(0, n_iter, body, t)
            return sparse_m_step(resp, grp, n_groups, n_ann, t, prior=_START_COUNTS) + (t,)

        run = _START_PROGRAMS[key] = jax.jit(run)
    with x64():
        out = run(Responses(jnp.asarray(item), jnp.asarray(annotator), jnp.asarray(label)),
                  jnp.asarray(group), jnp.asarray(gold), jnp.asarray(t0, jnp.float64))
        fpr, tpr, prev, post = (np.asarray(v, np.float64) for v in out)
    lo, hi = _POOLED_CLIP
    return np.clip(fpr, lo, hi), np.clip(tpr, lo, hi), np.clip(prev, lo, hi), post


def pooled_start(args, static: dict, *, n_iter: int = 50) -> dict:
    """A bounded start for the pooled model's sampler or optimiser: constrained sample-site values.

    ``n_iter`` sparse EM steps (:func:`noisycal_bayes.core.sparse.sparse_m_step` / ``sparse_e_step``, Beta(2, 2)
    pseudo-counts, gold labels observed) from the vote share of each item, which keep every estimate inside
    (0, 1); then every rate clipped to ``[0.02, 0.98]``. The population starts at the mean and spread of
    the annotators' logit rates (spread floored at 0.2), ``z`` at the standardised rates (clipped to +-3),
    written in the parametrisation of ``args``' ``centering`` (:func:`~noisycal_bayes.models.pooled_channels`).
    Platt: slope and intercept from least squares of the clipped logit posterior on the logit score.
    Low-noise designs (fpr ~ 0.002, tpr ~ 0.99; prevalence near 0 or 1) get a finite start this way.
    """
    kind = static["kind"]
    fpr, tpr, prev, post = _start_em(args, static, n_iter)
    lf, lt = _logit(fpr), _logit(tpr)
    mu_f, mu_t = float(np.mean(lf)), float(np.mean(lt))
    s_f, s_t = max(float(np.std(lf)), 0.2), max(float(np.std(lt)), 0.2)
    mean_gap = max(mu_t - mu_f, 0.1)
    z_f = np.clip((lf - mu_f) / s_f, -3, 3)
    z_t = np.clip((lt - (mu_f + mean_gap)) / s_t, -3, 3)
    centering = args[ARG_CENTERING] if len(args) > ARG_CENTERING else np.zeros((2, lf.size))
    sites = {"mu_fpr": mu_f, "mean_gap": mean_gap, "sigma_fpr": s_f, "sigma_tpr": s_t,
             "z_fpr": _from_standard(z_f, mu_f, s_f, centering[0]),
             "z_tpr": _from_standard(z_t, mu_f + mean_gap, s_t, centering[1])}
    if kind == "platt":
        p = np.clip(post, 0.05, 0.95)
        y = np.log(p / (1 - p))
        s = np.asarray(args[5], np.float64)
        var = np.var(s)
        slope = float(np.cov(s, y, bias=True)[0, 1] / var) if var > 0 else 1.0
        sites.update(slope=slope, intercept=float(np.mean(y) - slope * np.mean(s)))
    elif kind == "monotone":
        prev = np.sort(prev)
        inc = np.maximum(np.diff(np.concatenate([[0.0], prev, [1.0]])), 1e-2)
        sites["increments"] = inc / inc.sum()
    else:
        sites["prevalence"] = prev.reshape(()) if kind == "dawid_skene" else prev
    return {k: np.asarray(v, np.float64) for k, v in sites.items()}


def _from_standard(z, mu, sigma, c):
    """The site value with centring ``c`` for the standardised rate ``z`` (``logit r = mu + sigma z``):
    ``c mu + sigma^c z`` (inverts ``logit r = mu + sigma^(1 - c) (site - c mu)``)."""
    return c * mu + np.power(sigma, c) * z


def _to_logit(site, mu, sigma, c):
    """``logit r = mu + sigma^(1 - c) (site - c mu)`` (:func:`~noisycal_bayes.models.pooled_channels`), any
    leading dims."""
    return mu + np.power(sigma, 1 - c) * (site - c * mu)


def pooled_derived(sites: dict, centering=None) -> tuple:
    """``(draws, population)`` from constrained pooled sites with leading dims (e.g. (chain, draw)).

    ``centering`` (2, n_annotators) is the parametrisation the sites were sampled in (``pooled_inputs``' last
    argument; None = non-centred).

    ``draws`` has the non-pooled models' names (``fpr``, ``tpr``, ``gap``, ``u``, prevalence part);
    ``population`` the population sites plus ``median_fpr = sigmoid(mu_fpr)``,
    ``median_tpr = sigmoid(mu_fpr + mean_gap)``.
    """
    s = {k: np.asarray(v, np.float64) for k, v in sites.items()}
    mu_f, mu_t = s["mu_fpr"], s["mu_fpr"] + s["mean_gap"]
    c_f, c_t = (0.0, 0.0) if centering is None else (np.asarray(centering[0]), np.asarray(centering[1]))
    fpr = _sigmoid(_to_logit(s["z_fpr"], mu_f[..., None], s["sigma_fpr"][..., None], c_f))
    tpr = _sigmoid(_to_logit(s["z_tpr"], mu_t[..., None], s["sigma_tpr"][..., None], c_t))
    gap = tpr - fpr
    draws = {"fpr": fpr, "tpr": tpr, "gap": gap, "u": gap / (1 - fpr)}
    if "increments" in s:
        draws["prevalence"] = np.cumsum(s["increments"], axis=-1)[..., :-1]
    for k in ("prevalence", "increments", "slope", "intercept"):
        if k in s:
            draws[k] = s[k]
    population = {k: s[k] for k in ("mu_fpr", "mean_gap", "sigma_fpr", "sigma_tpr")}
    population.update(median_fpr=_sigmoid(mu_f), median_tpr=_sigmoid(mu_t))
    return draws, population


def population_summary(population: dict, *, level: float = 0.9) -> dict:
    """The crowd in numbers: median fpr / tpr of the population and the range holding ``level`` of its annotators.

    For each of fpr and tpr: ``median`` (posterior mean of ``sigmoid(mu)``, with its ``level`` credible
    interval ``median_interval``) and ``range`` = ``sigmoid(mu -+ z sigma)`` at the posterior means of
    ``mu`` and ``sigma`` (``z`` the normal quantile of ``(1 + level) / 2``: 1.645 for 90%), i.e. where the
    middle ``level`` of the population's annotators lie. Works on draws (any leading dims) or a point.
    """
    from scipy.special import ndtri

    z = float(ndtri((1 + level) / 2))
    out = {"level": level}
    mu = {"fpr": np.asarray(population["mu_fpr"]),
          "tpr": np.asarray(population["mu_fpr"]) + np.asarray(population["mean_gap"])}
    for name in ("fpr", "tpr"):
        m, sd = mu[name].ravel(), np.asarray(population[f"sigma_{name}"]).ravel()
        med = _sigmoid(m)
        q = np.quantile(med, [(1 - level) / 2, (1 + level) / 2])
        out[name] = {"median": float(med.mean()), "median_interval": (float(q[0]), float(q[1])),
                     "range": (float(_sigmoid(m.mean() - z * sd.mean())), float(_sigmoid(m.mean() + z * sd.mean()))),
                     "spread_logit": float(sd.mean())}
    return out


def _sigmoid(x):
    x = np.asarray(x, np.float64)
    return 0.5 * (1 + np.tanh(0.5 * x))  # = 1 / (1 + exp(-x)), without overflow for large |x|


def flag_annotators(gap_draws, annotator_ids, *, level: float = 0.9) -> dict:
    """Annotators whose gap is not clearly positive, from gap draws of shape (..., n_annotators).

    ``"uninformative"``: the equal-tailed ``level`` interval of ``gap_j`` contains 0; ``"adversarial"``: its
    upper end is below 0 (the annotator labels the opposite class more often than not). Annotator ids.
    """
    g = np.asarray(gap_draws, np.float64).reshape(-1, len(annotator_ids))
    lo, hi = np.quantile(g, [(1 - level) / 2, (1 + level) / 2], axis=0)
    ids = np.asarray(annotator_ids, dtype=object)
    return {"level": level, "uninformative": ids[(lo <= 0) & (hi >= 0)].tolist(), "adversarial": ids[hi < 0].tolist()}


def channel_or_none(fpr, tpr, annotator_ids):
    """``channel_from(fpr, tpr)``; with the crowd orientation (``Channel(..., orientation="crowd")``: gaps of any
    sign) when some annotator has tpr <= fpr, as a pooled fit may estimate spammers and adversaries."""
    from ..models.result import channel_from

    crowd = bool(np.any(np.asarray(tpr) <= np.asarray(fpr)))
    return channel_from(fpr, tpr, annotator_ids, orientation="crowd" if crowd else "every")


# ------------------------------------------------------------------------------------------------ K classes
def check_class_model(model, func: str) -> str:
    """``model`` of a K-class fit: a key of :data:`~noisycal_bayes.models.MULTICLASS_MODELS`."""
    if model not in tuple(MULTICLASS_MODELS):
        raise ValueError(f"{func}: `model` must be one of {list(tuple(MULTICLASS_MODELS))}; got {model!r}.")
    return model


def bound_log_ratio(table_type, static: dict):
    """The log-ratio model with sizes bound; positional args = the table's arrays, the scaling, the prior."""
    def bound(*args):
        *arrays, scaling, prior = args
        return grouped_multiclass_log_ratio(table_type(*arrays), scaling, prior=prior, **static)

    bound.__name__ = "grouped_multiclass_log_ratio_bound"
    return bound


def bound_class_model(model: str, table_type, static: dict):
    """The model function with sizes bound; positional args = the table's arrays, then the prior params."""
    fn = MULTICLASS_MODELS[model]

    def bound(*args):
        *arrays, prior = args
        return fn(table_type(*arrays), prior=prior, **static)

    bound.__name__ = f"{model}_multiclass_bound"
    return bound


# Starting values are kept this far inside the simplex: on its boundary the sampler's unconstrained
# (stick-breaking) coordinates are infinite.
START_FLOOR = 1e-3


def class_start_sites(model, confusion, prevalence, n_groups):
    """Constrained sample-site values at a point, kept ``START_FLOOR`` inside the simplices."""
    k = confusion.shape[-1]
    conf = (np.asarray(confusion, np.float64) + START_FLOOR) / (1 + k * START_FLOOR)
    prev = (np.asarray(prevalence, np.float64).reshape(n_groups, k) + START_FLOOR) / (1 + k * START_FLOOR)
    if model == "dawid_skene":
        return {"confusion": conf, "prevalence": prev[0]}
    if model == "grouped":
        return {"confusion": conf, "prevalence": prev}
    # Pooled: log-odds against the diagonal, their mean over annotators, spread and standardised offsets.
    log_c = np.log(conf)
    eta = log_c - np.diagonal(log_c, axis1=-2, axis2=-1)[..., None]
    off = ~np.eye(k, dtype=bool)
    eta = eta[:, off].reshape(conf.shape[0], k, k - 1)
    mu = eta.mean(axis=0)
    sigma = max(float(np.std(eta - mu)), 0.2)
    return {"mu": mu, "sigma": np.float64(sigma), "z": np.clip((eta - mu) / sigma, -3, 3), "prevalence": prev}


NOT_DOMINANT = ("{func}: the start's average confusion matrix is not diagonally dominant, so the class labelling is "
                "not fixed (models/dawid_skene.py, 'K classes'). Pass an `init` whose average confusion has the "
                "largest entry of each row on the diagonal, or add gold items.")


def class_start_from_init(init, table, prior, sizes, func):
    """``(confusion, prevalence)`` from ``init``: an object with ``confusion`` (and ``prevalence``) or an array."""
    j, k, g = sizes["n_annotators"], sizes["n_classes"], sizes["n_groups"]
    conf = np.asarray(getattr(init, "confusion", init), np.float64)
    if conf.shape != (j, k, k) or not np.all(np.isfinite(conf)) or np.any(conf < 0):
        raise ValueError(f"{func}: `init` must be a confusion array of shape ({j}, {k}, {k}) (or a fit with "
                         f"`confusion`); got shape {conf.shape}.")
    conf = conf / conf.sum(-1, keepdims=True)
    if not diagonally_dominant(conf[None])[0]:
        raise ValueError(NOT_DOMINANT.format(func=func))
    prev = getattr(init, "prevalence", None)
    if prev is not None and np.shape(prev) == (g, k):
        return conf, np.asarray(prev, np.float64)
    # Prevalence from one E-step at the given channels (uniform prevalence), plus the prior's pseudo-counts.
    _, m = expected_class_counts(table, conf, np.full((g, k), 1.0 / k), g)
    m = m + (prior.prevalence - 1.0)
    tot = m.sum(-1, keepdims=True)
    return conf, np.where(tot > 0, m / np.where(tot > 0, tot, 1.0), 1.0 / k)  # an empty group: uniform


def class_draws(got: dict, model: str, scaling, *, n_chains: int, n_draws: int, n_classes: int):
    """The K-class sampler's draws (chain, draw, ...) back in the model's terms: ``(confusion, prevalence (chain,
    draw, G, K), population_confusion or None, extra scalar draws, draws for the diagnostics, their dims)``.

    Pooled: confusion rows ``softmax([0 at y, mu_y + sigma z_jy])``; log-ratio coordinates (``scaling`` not None):
    :func:`~noisycal_bayes.models.log_ratio.log_ratio_point` in float64; otherwise the draws themselves.
    """
    got = {k_: np.asarray(v, np.float64) for k_, v in got.items()}
    k = n_classes
    extra, pop = {}, None
    if model == "pooled":
        eta = np.asarray(insert_diagonal_zero(got["mu"][:, :, None] + got["sigma"][:, :, None, None, None] * got["z"], np))
        conf = softmax_rows(eta)
        pop = softmax_rows(np.asarray(insert_diagonal_zero(got["mu"], np)))
        extra["sigma"] = got["sigma"].reshape(-1)
    elif scaling is not None:
        # Back to the simplex in float64 (the same map as the model's, on the float32 draws).
        log_c, log_p = log_ratio_point(jax.tree.map(np.asarray, scaling), got["confusion_u"], got["prevalence_u"])
        conf, got["prevalence"] = np.exp(log_c), np.exp(log_p)
    else:
        conf = got["confusion"]
    prev = got["prevalence"].reshape(n_chains, n_draws, -1, k)

    draws = {"confusion": conf, "prevalence": prev}
    dims = {"confusion": ("annotator", "true_class", "label_class"), "prevalence": ("group", "true_class")}
    if pop is not None:
        draws.update(population_confusion=pop, sigma=got["sigma"])
        dims.update(population_confusion=("true_class", "label_class"), sigma=())
    return conf, prev, pop, extra, draws, dims


# ------------------------------------------------------------------------------------------------ one door per fit
def class_door(name: str, *, passed: tuple, renamed: dict | None = None):
    """A fit's one door: K-class data (more than two classes) goes to the K-class fit ``name`` (a function of the
    decorated fit's module) with only the options the caller set (``renamed`` maps a binary name to the K-class one),
    so that ``fit_em(data)`` equals ``fit_em_multiclass(data)``; binary data (two classes) to the decorated fit,
    unchanged.

    An option outside ``passed`` has no K-class meaning: a value other than the binary default is a ValueError naming
    it. ``groups`` passes on only as a group label per item (a Binning or a number of bins is binary).
    """
    renamed = renamed or {}

    def wrap(binary):
        params = inspect.signature(binary).parameters
        names = set(params) - {"data"}

        @functools.wraps(binary)
        def door(data, **options):
            if not (isinstance(data, (AnnotationSet, SufficientStats)) and data.n_classes > 2):
                return binary(data, **options)
            func = binary.__name__
            unknown = sorted(set(options) - names)
            if unknown:
                raise TypeError(f"{func}() got an unexpected keyword argument {unknown[0]!r}")
            model = options.get("model", params["model"].default)
            if model in MODELS and model not in MULTICLASS_MODELS:  # the calibration-curve models of P(Y = 1)
                binary_only(data, f"{func}(model={model!r})", f"{name} with model 'grouped', 'dawid_skene' or 'pooled'")
            groups = options.get("groups", params["groups"].default)
            per_item = not (groups is params["groups"].default or isinstance(groups, (Binning, int, np.integer)))
            binary_options = [k for k, v in options.items()
                           if k not in passed and k not in renamed and not (k == "groups" and per_item)
                           and not (k != "groups" and _is_default(v, params[k].default))]
            if binary_options:
                raise ValueError(f"{func}: {binary_options} apply to binary data only; for K-class data call "
                                 f"{name}(data, ...) directly.")
            kept = {renamed.get(k, k): v for k, v in options.items() if k in passed or k in renamed
                    or (k == "groups" and per_item)}
            return binary.__globals__[name](data, **kept)

        return door

    return wrap


def _is_default(value, default) -> bool:
    # Scalars compare by value; anything else (arrays, tuples of arrays, objects) only by identity.
    scalar = (str, bool, int, float, type(None))
    return value is default or (isinstance(value, scalar) and isinstance(default, scalar) and value == default)
