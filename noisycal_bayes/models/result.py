"""`FitResult`: the one result type of ``fit_em``, ``fit_map`` and ``fit_nuts`` for any number of classes: binary fits
are ``FitResult`` itself (channels), K-class fits its subclasses on confusion matrices (:class:`ConfusionFit`). The
surface every K shares is written once, on :class:`FitResult`; each kind supplies its values and per-item kernel."""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from .._validation import check_positive_int
from ..core import usable_confusions, x64
from ..core.channel import MAX_CONDITION
from ..core.likelihood import class_log_joint, logsumexp_rows, rows_class_log_joint
from ..core.tables import SparseTable
from ..data import AnnotationSet, Channel
from ..data.columns import response_columns
from ..data.responses import pair_keys, repeated_runs
from .arviz import fit_to_arviz
from ..data.compress import sparse_table
from .inputs import PREVALENCE_DIM, GroupAssignment, ModelInputs, class_arrays, table_args


def channel_from(fpr, tpr, annotator_ids=None, *, orientation: str = "every") -> Channel:
    """A Channel from estimated rates (rounding excursions beyond [0, 1] clipped); ``orientation`` as in Channel."""
    return Channel(np.clip(np.asarray(fpr, dtype=np.float64), 0.0, 1.0),
                   np.clip(np.asarray(tpr, dtype=np.float64), 0.0, 1.0),
                   None if annotator_ids is None else tuple(annotator_ids), orientation=orientation)


def point_dict(model, fpr, tpr, prevalence=None, slope=None, intercept=None) -> dict:
    """Point estimate as ``name -> array`` with the same names and trailing shapes as the draws."""
    fpr, tpr = np.asarray(fpr, dtype=np.float64), np.asarray(tpr, dtype=np.float64)
    gap = tpr - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(fpr < 1, gap / (1 - fpr), 0.0)
    out = {"fpr": fpr, "tpr": tpr, "gap": gap, "u": u}
    if model == "platt":
        out["slope"] = np.float64(slope)
        out["intercept"] = np.float64(intercept)
    else:
        prev = np.asarray(prevalence, dtype=np.float64)
        out["prevalence"] = prev.reshape(()) if model == "dawid_skene" else prev
    for name, value in out.items():  # a frozen result: its estimate cannot be edited in place
        value = out[name] = np.array(value, dtype=np.float64)
        value.setflags(write=False)
    return out


#: Trailing dims of the variables of a fit with channels per score group (``fit_map`` / ``fit_nuts`` with
#: ``model="score_dependent"`` or ``"correlated"``; :func:`noisycal_bayes.inference.alternatives.registered_fit`).
GROUP_CHANNEL_DIMS = {**{k: ("annotator",) for k in ("fpr", "tpr", "gap", "fpr_centre", "u_centre", "tpr_centre",
                                                     "gap_centre", "fpr_marginal", "tpr_marginal")},
                      **{k: ("group", "annotator") for k in ("fpr_group", "tpr_group", "gap_group", "e_fpr", "e_u")},
                      "prevalence": ("group",), "tau_fpr": (), "tau_u": (), "dependence": ()}


#: Why the clean-label posterior of a ``model="correlated"`` fit is refused.
CORRELATED_POSTERIOR = ("under the correlated model the clean label's posterior integrates the item effect shared by "
                        "the annotators, which is not computed here; fit model='score_dependent' or the shared-channel "
                        "model (model='grouped').")


class view:
    """A computed read-only attribute that a subclass may store as a dataclass field (declared ``= field()``) instead:
    a non-data descriptor, so a value in the instance's ``__dict__`` wins (a ``property`` would refuse it)."""

    def __init__(self, fget):
        self.fget, self.__doc__ = fget, fget.__doc__

    def __get__(self, obj, owner=None):
        return self if obj is None else self.fget(obj)


class ChannelAccess:
    """``fpr``, ``tpr``, ``gap`` and ``require()`` of a result with ``channel``, ``identified``, ``reason`` and
    ``method`` attributes: shared by :class:`FitResult` and the reference layer's ``ChannelEstimate``."""

    @property
    def fpr(self) -> np.ndarray | None:
        return None if self.channel is None else self.channel.fpr

    @property
    def tpr(self) -> np.ndarray | None:
        return None if self.channel is None else self.channel.tpr

    @property
    def gap(self) -> np.ndarray | None:
        return None if self.channel is None else self.channel.gap

    def require(self) -> Channel:
        """Return ``channel``; raise ``ValueError`` with the reason when not identified or missing."""
        if not self.identified or self.channel is None:
            why = self.reason or "no admissible estimate"
            raise ValueError(f"{self.method}: channels not identified: {why}")
        return self.channel


@dataclass(frozen=True, eq=False)
class FitResult(ChannelAccess):
    """A fitted channel model: point estimate, posterior draws (NUTS), diagnostics and inputs.

    Attributes
    ----------
    model : str
        ``"dawid_skene"``, ``"grouped"``, ``"histogram"``, ``"monotone"`` or ``"platt"``; or, with channels per
        score group (:attr:`group_channels`), ``"score_dependent"`` (``fit_em`` / ``fit_map`` / ``fit_nuts``) or
        ``"correlated"`` (``fit_map`` / ``fit_nuts``); :func:`~noisycal_bayes.inference.alternatives.registered_fit`
        lists their variables.
    method : str
        ``"em"``, ``"map"`` or ``"nuts"``.
    channel : Channel or None
        The EM/MAP estimate, or the posterior mean of ``fpr`` and ``tpr`` for NUTS (None if every EM
        start failed). With channels per score group: their item-weighted average ``sum_g (n_g / n) fpr_gj``,
        which is no item's channel (read :attr:`group_channels`).
    point : dict of name -> ndarray
        EM/MAP estimate with the names and trailing shapes of ``draws`` (for NUTS: the EM/MAP fit the
        chains started from).
    groups : GroupAssignment
        Group (bin) of each item, number of groups, score edges: reuse them downstream.
    inputs : ModelInputs
        The arrays the model was evaluated on (compressed patterns with ``inverse`` row per item, or
        flat responses), for posterior propagation.
    prior : Prior or None
        None for a maximum-likelihood EM fit.
    draws : dict of name -> ndarray of shape (n_chains, n_draws, ...) or None
        Posterior draws (NUTS only): ``fpr``, ``tpr``, ``gap``, ``u`` (annotator), ``prevalence``
        (group / bin; scalar for the marginal model), ``increments`` (monotone), ``slope``,
        ``intercept`` (Platt).
    sample_stats : dict of name -> ndarray of shape (n_chains, n_draws) or None
        ``diverging``, ``lp``, ``n_steps``, ``acceptance_rate``, ``energy``, ``step_size``, ``tree_depth``.
    diagnostics : DataFrame or None
        R-hat, bulk and tail ESS per scalar (see :func:`noisycal_bayes.inference.mcmc.mcmc_diagnostics`).
    n_divergent : int
    converged, identified : bool
    reason : str
        Why not identified / not converged ('' when fine).
    loglik : float
        Log-likelihood at the EM / MAP estimate (NaN for NUTS; see :meth:`log_likelihood` per draw).
    warnings : tuple of str
        Every warning message issued while fitting.
    settings, details : dict
        How the fit was made (seeds, sizes, chain layout, precision) and method-specific extras.
    """

    model: str
    method: str
    channel: Channel | None
    point: dict
    groups: GroupAssignment
    inputs: ModelInputs
    prior: object = None
    annotator_ids: tuple = ()
    draws: dict | None = None
    sample_stats: dict | None = None
    diagnostics: pd.DataFrame | None = None
    n_divergent: int = 0
    converged: bool = True
    identified: bool = True
    reason: str = ""
    loglik: float = float("nan")
    n_iter: int = 0
    failed_starts: tuple = ()
    warnings: tuple = ()
    settings: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ the surface of every K
    @view
    def classes(self) -> tuple:
        """Class names, index ``k`` <-> ``classes[k]``: ``(0, 1)`` for a binary fit."""
        return (0, 1)

    @property
    def n_classes(self) -> int:
        """K, the number of classes (2 for a binary fit)."""
        conf = self.confusion
        return 2 if conf is None else int(np.shape(conf)[-1])

    @view
    def confusion(self) -> np.ndarray | None:
        """Confusion matrices ``C[j, y, a] = P(A_j = a | Y = y)``, shape (n_annotators, K, K).

        Binary fits: ``[[1 - fpr, fpr], [1 - tpr, tpr]]`` of ``channel`` (the estimate, or the posterior mean for
        NUTS; None without a channel). K-class kinds store theirs: the estimate, or the draws (n_draws_total,
        n_annotators, K, K) of :class:`MulticlassPosterior`.
        """
        return None if self.channel is None else self.channel.confusion

    @property
    def n_annotators(self) -> int:
        conf = self.confusion
        return len(self.annotator_ids) if conf is None else int(np.shape(conf)[-3])

    def _values(self) -> tuple[dict, bool]:
        """``(values, per_draw)``: the variables, with (chain, draw) axes when ``per_draw``, else the estimate."""
        return (self.point, False) if self.draws is None else (self.draws, True)

    def _diagnostics_table(self) -> pd.DataFrame | None:
        """R-hat and ESS per scalar (:func:`~noisycal_bayes.inference.mcmc.mcmc_diagnostics`), or None."""
        return self.diagnostics

    def _observed_data(self) -> dict | None:
        """The ``observed_data`` group of :meth:`to_arviz` (name -> (dims, values), with ``item`` / ``annotator`` /
        ``response`` coordinates under ``"coords"``), or None for a fit without items (SufficientStats)."""
        if self.inputs.inverse is None:
            return None
        labels = self.details.get("labels")
        out = {"group": (("item",), np.asarray(self.groups.index))}
        if labels is not None:
            out["labels"] = (("item", "annotator"), labels)
        if self.details.get("scores") is not None:
            out["scores"] = (("item",), self.details["scores"])
        return {**out, "coords": {"item": np.arange(self.inputs.n_items), "annotator": self.coords["annotator"]}}

    # ------------------------------------------------------------------ views
    @property
    def group_channels(self) -> tuple | None:
        """Channels per score group ``(fpr_group, tpr_group)``, each of shape (n_samples, n_groups, n_annotators):
        the draws flattened over chains (chain-major) or the estimate as one sample; None for the shared-channel
        models. Item ``i`` in group ``g = groups.index[i]`` has the channel ``(fpr_group[:, g], tpr_group[:, g])``.
        """
        values = self.draws if self.draws is not None else self.point
        if not values or "fpr_group" not in values:
            return None
        src = self._samples(("fpr_group", "tpr_group"))
        return src["fpr_group"], src["tpr_group"]

    @property
    def dims(self) -> dict:
        """Trailing dimension names of each variable in ``draws`` / ``point`` (after ``chain, draw``)."""
        if self.group_channels is not None:
            return {k: GROUP_CHANNEL_DIMS[k] for k in self._values()[0]}
        dims = {"fpr": ("annotator",), "u": ("annotator",), "tpr": ("annotator",), "gap": ("annotator",)}
        if self.model == "platt":
            return {**dims, "slope": (), "intercept": ()}
        pdim = PREVALENCE_DIM[self.model]
        dims["prevalence"] = () if pdim is None else (pdim,)
        return {**dims, "increments": ("increment",)} if self.model == "monotone" else dims

    @property
    def coords(self) -> dict:
        """Labels of each dimension: annotator ids, group / bin numbers, increment numbers."""
        out = {"annotator": list(self.annotator_ids)}
        pdim = "group" if self.group_channels is not None else PREVALENCE_DIM[self.model]
        if pdim is not None:
            out[pdim] = list(range(self.groups.n_groups))
        if self.model == "monotone":
            out["increment"] = list(range(self.groups.n_groups + 1))
        return out

    @view
    def prevalence(self) -> np.ndarray | None:
        """Prevalence per group / bin, shape (n_groups,) ((1,) for the marginal model; None for Platt).

        The EM/MAP estimate, or the posterior mean for NUTS.
        """
        if self.model == "platt" or (self.draws is None and "prevalence" not in self.point):
            return None
        src = self.draws["prevalence"].mean(axis=(0, 1)) if self.draws is not None else self.point["prevalence"]
        out = np.atleast_1d(np.array(src, dtype=np.float64))
        out.setflags(write=False)
        return out

    @view
    def n_chains(self) -> int:
        return 0 if self.draws is None else int(self.draws["fpr"].shape[0])

    @view
    def n_draws(self) -> int:
        return 0 if self.draws is None else int(self.draws["fpr"].shape[1])

    @property
    def rhat(self) -> dict | None:
        """R-hat per variable, arrays with the trailing shape of each variable (NUTS only)."""
        return self._diag_column("r_hat")

    @property
    def ess_bulk(self) -> dict | None:
        return self._diag_column("ess_bulk")

    @property
    def ess_tail(self) -> dict | None:
        return self._diag_column("ess_tail")

    # ---------------------------------------------- what readers of the old reference ChannelEstimate use
    @view
    def n_groups(self) -> int:
        """Number of (non-empty) groups or bins the fit used (1 for the marginal model)."""
        return int(self.groups.n_groups)

    @property
    def group_sizes(self) -> np.ndarray | None:
        """Items per group, shape (n_groups,) (None when the item-level group index is not kept)."""
        index = getattr(self.groups, "index", None)
        return None if index is None else np.bincount(np.asarray(index), minlength=self.n_groups)

    @view
    def loglik_trace(self) -> np.ndarray:
        """EM: objective at the start and after each iteration of the selected start; empty otherwise."""
        return np.asarray(self.details.get("loglik_trace", np.zeros(0)), dtype=np.float64)

    @property
    def annotators(self) -> pd.DataFrame | None:
        """EM: one row per annotator: ``annotator``, ``n_labels``, ``fpr``, ``tpr``, ``gap`` with 90% intervals
        (``*_lower``, ``*_upper``) and ``flag`` ("ok", "uninformative": the gap interval contains 0,
        "adversarial": gap < 0 and the interval excludes 0); None for other fits.

        The intervals are Jeffreys intervals from the E-step's soft counts
        (:func:`~noisycal_bayes.models.em_result.annotator_table`). Give ``usable_annotators(gap, gap_lower,
        gap_upper)`` (:mod:`noisycal_bayes.core.channel`) to weights and corrected labels to apply the rule
        "zero weight where the gap's interval contains zero".
        """
        table = self.details.get("annotators")
        return None if table is None else table.copy()

    def usable_annotators(self) -> np.ndarray | None:
        """Which annotators' labels may be corrected, bool (n_annotators,): the downstream rule of issue 16.

        EM fits: :func:`noisycal_bayes.core.channel.usable_annotators` on the gap intervals of
        :attr:`annotators` (False where the 90% interval contains 0; adversaries are usable). Other fits:
        ``gap != 0``. None without a channel. Pass it as ``usable=`` to the weight rules and corrected labels
        of :mod:`noisycal_bayes.core`.
        """
        from ..core.channel import usable_annotators

        if self.channel is None:
            return None
        table = self.details.get("annotators")
        if table is None:
            return np.asarray(usable_annotators(self.channel.gap))
        return np.asarray(usable_annotators(table["gap"].to_numpy(), table["gap_lower"].to_numpy(),
                                            table["gap_upper"].to_numpy()))

    @view
    def start_logliks(self) -> np.ndarray:
        """EM: final objective of every start (NaN where non-finite); empty otherwise."""
        return np.asarray(self.details.get("start_logliks", np.zeros(0)), dtype=np.float64)

    @view
    def selected_start(self) -> int:
        """EM: index of the start that gave the estimate (-1 when none or not applicable)."""
        return int(self.details.get("selected_start", -1))

    def _diag_column(self, col):
        table = self._diagnostics_table()
        if table is None:
            return None
        out = {}
        for name, arr in self._values()[0].items():
            vals = table.loc[table["name"] == name, col].to_numpy()
            out[name] = vals.reshape(arr.shape[2:])
        return out

    # ------------------------------------------------------------------ likelihood per item
    def log_likelihood(self, *, per: str = "item", max_values: int | None = None) -> np.ndarray:
        """Log-likelihood of each item's responses at every draw (NUTS) or at the point estimate.

        Parameters
        ----------
        per : {"item", "row"}
            ``"item"``: shape (n_chains, n_draws, n_items) (or (n_items,) without draws). ``"row"``: per
            compressed (group, pattern) row, before expanding to items (grouped models only).
        max_values : int, optional
            Refuse (``ValueError``) to build more values than this.

        Notes
        -----
        Evaluated by the model function itself (its ``record_loglik`` deterministic site), so it is the
        same formula the sampler used: ``log p(A_i) = logaddexp(log(1 - pi_i) + l0_i, log pi_i + l1_i)``.
        Items with a gold label ``g`` (``inputs.gold``) give ``log P(Y_i = g, A_i)``, as in the fit.
        """
        from . import MODELS
        from numpyro.handlers import substitute, trace

        if per not in ("item", "row"):
            raise ValueError(f"`per` must be 'item' or 'row'; got {per!r}.")
        if self.details.get("loglik_rows") is not None:  # channels per score group: stored by the fit, per table row
            rows = np.asarray(self.details["loglik_rows"], np.float64)
            rows = rows.reshape((-1,) + rows.shape[2:])
            rows = rows[:, self.inputs.item_rows()] if per == "item" else rows
            if max_values is not None and rows.size > max_values:
                raise ValueError(f"the log-likelihood would have {rows.size} values (> max_values={max_values}).")
            return self._per_draw(rows)
        if self.inputs.sparse:
            return self._sparse_item_values("loglik", per=per, max_values=max_values)
        if per == "row" and self.model == "platt":
            raise ValueError("per='row' needs a grouped model; the Platt model has one row per item.")
        model_fn = partial(MODELS[self.model], **self.inputs.static_kwargs(), record_loglik=True)
        prior = self.prior if self.prior is not None else _default_prior()
        src = self._samples(("fpr", "u", "prevalence", "increments", "slope", "intercept"))
        n_samples = src["fpr"].shape[0]
        if self.model == "monotone" and "increments" not in src:
            p = src["prevalence"]
            src["increments"] = np.diff(np.concatenate([np.zeros((p.shape[0], 1)), p, np.ones((p.shape[0], 1))], 1), axis=1)
        if "prevalence" in src and self.model == "monotone":
            src.pop("prevalence")
        size = n_samples * (self.inputs.n_items if per == "item" else self.inputs.patterns.shape[0])
        if max_values is not None and size > max_values:
            raise ValueError(f"the log-likelihood would have {size} values (> max_values={max_values}); thin the draws "
                             "or ask per='row'.")
        args = self.inputs.model_args()

        def one(params, *a):
            tr = trace(substitute(model_fn, data=params)).get_trace(*a, prior=prior)
            return tr["log_likelihood"]["value"]

        with x64():
            rows = np.asarray(jax.jit(jax.vmap(one, in_axes=(0,) + (None,) * len(args)))(src, *args))
        if per == "item" and self.model != "platt":
            rows = rows[:, self.inputs.item_rows()]
        gold = self._gold()
        if gold is not None:
            if per == "row":
                raise ValueError("per='row' cannot hold gold labels (they enter item by item); use per='item'.")
            # Gold items are observed latent labels: log P(Y_i = g, A_i) = log P(A_i) + log P(Y_i = g | A_i).
            post = self._pattern_posterior(rows.shape[0])
            with np.errstate(divide="ignore"):  # P(Y_i = g | A_i) = 0 in floating point: -inf, as the product is
                rows = np.where(gold == 1, rows + np.log(post), np.where(gold == 0, rows + np.log1p(-post), rows))
        return self._per_draw(rows)

    def _samples(self, names=None) -> dict:
        """The variables (those in ``names``) with a leading sample axis: draws (chains flattened) or the estimate."""
        if self.draws is not None:
            return {k: v.reshape((-1,) + v.shape[2:]) for k, v in self.draws.items() if names is None or k in names}
        return {k: np.asarray(v)[None] for k, v in self.point.items() if names is None or k in names}

    def _per_draw(self, values):
        """Values with one leading sample axis as (n_chains, n_draws, ...), or the estimate's without it."""
        values = np.asarray(values)
        return values[0] if not self.n_chains else values.reshape((self.n_chains, self.n_draws) + values.shape[1:])

    def _gold(self):
        """Known clean labels (n_items,) with -1 unknown, or None: carried by the inputs (pooled fits and the sparse
        path)."""
        gold = getattr(self.inputs, "gold", None)
        if gold is None or not np.any(np.asarray(gold) >= 0):
            return None
        return np.asarray(gold, np.int32)

    def clean_label_probability(self, data=None, *, max_values: int | None = None,
                                max_draws: int | None = None) -> np.ndarray:
        """The clean label's posterior per item: ``P(Y_i = 1 | A_i)`` (binary) or ``P(Y_i = k | A_i)`` (K classes).

        Parameters
        ----------
        data : AnnotationSet, MulticlassAnnotationSet or None
            The data the fit was made on. Fits that hold their responses (binary fits: ``inputs``; K-class NUTS:
            ``table``) evaluate those and need none; given, its items, annotators and classes must be the fit's
            (``ValueError`` otherwise). K-class EM and MAP fits hold only the estimate and the item groups: they read
            the responses from ``data``, which they need.
        max_values : int, optional
            Refuse (``ValueError``) to build more values than this.
        max_draws : int, optional
            K-class posterior: average over at most this many evenly thinned draws (None: all). Binary fits return
            every draw (thin with ``max_values``), so they take none.

        Returns
        -------
        ndarray
            Binary: shape (n_items,) at the estimate, or (n_chains, n_draws, n_items) at every draw (NUTS).
            K classes: shape (n_items, K) at the estimate, or its posterior mean over the draws (NUTS).

        Notes
        -----
        Bayes' rule with the latent label's prior ``pi_{g(i)}`` (or ``m(z_i)`` for Platt). Binary:
        ``sigmoid(log pi + l1 - log(1 - pi) - l0)`` (:func:`noisycal_bayes.core.posterior_positive`) per compressed
        row; K classes: ``softmax_y(log pi_{g(i), y} + sum_r log C[j_r, y, a_r])``
        (:func:`noisycal_bayes.core.likelihood.rows_class_log_joint`). Gold items get their (observed) label.
        """
        return self._item_values("posterior", data, max_values=max_values, max_draws=max_draws)

    def _item_values(self, what: str, data, *, max_values, max_draws):
        """Binary kernel of :meth:`clean_label_probability` (``what="posterior"``)."""
        if max_draws is not None:
            raise ValueError("clean_label_probability: `max_draws` thins the posterior mean of a K-class fit; a binary "
                             "fit returns every draw (limit them with `max_values`).")
        if data is not None:
            check_fitted_data(data, self.inputs.n_items, self.n_annotators, 2)
        if self.channel is None:
            raise ValueError("this fit has no estimate (every EM start failed).")
        if self.inputs.sparse:
            return self._sparse_item_values("posterior", per="item", max_values=max_values)
        n_samples = (self.n_chains * self.n_draws) if self.draws is not None else 1
        if max_values is not None and n_samples * self.inputs.n_items > max_values:
            raise ValueError(f"the result would have {n_samples * self.inputs.n_items} values "
                             f"(> max_values={max_values}).")
        out = self._pattern_posterior(n_samples)
        gold = self._gold()
        if gold is not None:
            out = np.where(gold >= 0, gold, out)  # a gold item's clean label is known
        return self._per_draw(out)

    def _pattern_posterior(self, n_samples: int) -> np.ndarray:
        """``P(Y_i = 1 | A_i)`` of shape (n_samples, n_items) from the compressed inputs, without gold labels."""
        from ..core import posterior_positive

        src, inp = self._samples(), self.inputs
        channels = self.group_channels
        if channels is not None:
            if self.model == "correlated":
                raise ValueError(f"clean_label_probability: {CORRELATED_POSTERIOR}")
            from ..core.posterior import posterior_positive_group_channels

            prev = src["prevalence"].reshape(n_samples, -1)
            return posterior_positive_group_channels(inp.patterns, inp.row_group, *channels, prev)[:, inp.item_rows()]
        with x64():
            if self.model == "platt":
                dense, col = _platt_columns(inp)
                s = jnp.asarray(inp.logit_score)

                def one(f, t, a, b):
                    return posterior_positive(dense, None, f[col], t[col], jax.nn.sigmoid(a * s + b))

                out = jax.vmap(one)(src["fpr"], src["tpr"], src["slope"], src["intercept"])
            else:
                prev = src["prevalence"].reshape(n_samples, -1)

                def one(f, t, p):
                    return posterior_positive(inp.patterns, inp.row_group, f, t, p)

                out = np.asarray(jax.vmap(one)(src["fpr"], src["tpr"], prev))[:, inp.item_rows()]
        return np.asarray(out)

    def _sparse_item_values(self, what: str, *, per: str, max_values):
        """Per-item log-likelihood or ``P(Y_i = 1 | A_i)`` of a fit on sparse responses, at every draw
        (bootstrap) or at the estimate, by :mod:`noisycal_bayes.core.sparse` (gold items: their known label)."""
        from ..core.sparse import sparse_e_step, sparse_item_loglik
        from ..core.tables import Responses

        if per == "row":
            raise ValueError("per='row' needs compressed (group, pattern) rows; this fit used sparse responses "
                             "(details['path'] == 'sparse'), whose rows are the items: use per='item'.")
        src, inp = self._samples(), self.inputs
        n_samples = src["fpr"].shape[0]
        if max_values is not None and n_samples * inp.n_items > max_values:
            raise ValueError(f"the result would have {n_samples * inp.n_items} values (> max_values={max_values}).")
        resp = Responses(np.asarray(inp.item, np.int32), np.asarray(inp.annotator, np.int32),
                         np.asarray(inp.label, np.int32))
        group = np.asarray(inp.row_group, np.int32)
        gold = None if inp.gold is None else np.asarray(inp.gold, np.int32)

        def one(f, t, p):
            if what == "loglik":
                return sparse_item_loglik(resp, group, f, t, p, gold=gold)
            return sparse_e_step(resp, group, f, t, p, gold=gold)[1]

        with x64():
            prev = np.asarray(src["prevalence"], np.float64).reshape(n_samples, -1)
            # One compiled program (op-by-op dispatch would compile every primitive separately).
            out = np.asarray(jax.jit(jax.vmap(one))(np.asarray(src["fpr"], np.float64),
                                                    np.asarray(src["tpr"], np.float64), prev))
        return self._per_draw(out)

    # ------------------------------------------------------------------ ArviZ and tables
    def to_arviz(self, *, log_likelihood="auto"):
        """Convert to ArviZ: ``InferenceData`` with ArviZ 0.x, an ``xarray.DataTree`` with ArviZ >= 1.

        Groups: ``posterior`` (every variable of ``draws`` with dims ``chain, draw, annotator | group |
        bin``), ``sample_stats`` (``diverging``, ``lp``, ``n_steps``, ``acceptance_rate``, ``energy``,
        ``step_size``, ``tree_depth``), ``observed_data`` (``labels`` (item, annotator) with -1 =
        missing, ``scores`` (item) when present, ``group`` (item)) and ``log_likelihood`` (``labels``
        of shape (chain, draw, item): per-item log-likelihood, so that ``az.loo`` / ``az.waic`` work).
        A fit from :class:`~noisycal_bayes.data.SufficientStats` has no items: it gets ``posterior`` and
        ``sample_stats`` only (``log_likelihood=True`` raises). K-class posterior: ``posterior`` holds ``confusion``
        (chain, draw, annotator, true_class, label_class) and ``prevalence`` (chain, draw, group, true_class) (pooled:
        also ``population_confusion`` (chain, draw, true_class, label_class) and ``sigma``), ``observed_data``
        ``response_item``, ``response_annotator``, ``labels`` per response and ``group``, ``gold`` per item.

        Parameters
        ----------
        log_likelihood : "auto", bool
            "auto" includes the per-item log-likelihood unless it has more than
            ``MAX_LOGLIK_VALUES`` (5e7) values, in which case it is left out with a warning.

        Notes
        -----
        The sampler is NumPyro's NUTS kernel driven by a cached compiled program, not ``numpyro.infer.MCMC``,
        so ``az.from_numpyro`` does not apply; and ``from_numpyro``'s automatic log-likelihood would be
        meaningless here anyway (the likelihood enters through ``numpyro.factor`` on compressed counts,
        ENVIRONMENT.md). The same code serves ArviZ 0.23 (Python 3.11) and 1.x (Python >= 3.12).

        Raises
        ------
        ValueError
            The result has no draws (EM / MAP fits); ``log_likelihood=True`` for a fit from SufficientStats.
        """
        return fit_to_arviz(self, log_likelihood)

    def summary(self, *, level: float = 0.9, prob: float | None = None) -> pd.DataFrame:
        """A pandas table: one row per scalar parameter.

        NUTS: ``mean``, ``sd``, equal-tailed ``level`` interval (``lower``, ``upper``), ``r_hat``,
        ``ess_bulk``, ``ess_tail``. EM / MAP: ``value`` (the point estimate; the column was ``estimate``
        before issue 15). The row index is ``"name[label]"`` (K-class fits: ``confusion[annotator, true class,
        label class]`` and ``prevalence[group, class]``, and the pooled model's population rows and spread).
        Built here (not with ``az.summary``, whose columns differ between ArviZ 0.23 and 1.x).
        ``prob=`` is the deprecated name of ``level`` (``DeprecationWarning``); ``table.attrs["level"]``
        (and, for old readers, ``attrs["prob"]``) records it.
        """
        if prob is not None:
            warnings.warn("FitResult.summary(prob=...) is deprecated; use level=...", DeprecationWarning,
                          stacklevel=2)
            level = prob
        prob = float(level)
        if not 0 < prob < 1:
            raise ValueError(f"`level` must lie strictly between 0 and 1; got {prob}.")
        rows, keys = [], []
        coords, dims = self.coords, self.dims
        src, per_draw = self._values()
        for name, arr in src.items():
            arr = np.asarray(arr)
            shape = arr.shape[2:] if per_draw else arr.shape
            for idx in (np.ndindex(*shape) if shape else [()]):
                labs = [str(coords.get(dims[name][a], range(10**9))[k]) for a, k in enumerate(idx)]
                label = name if not idx else f"{name}[{', '.join(labs)}]"
                keys.append((name, idx))
                if not per_draw:
                    rows.append({"parameter": label, "value": float(arr[idx])})
                    continue
                x = arr[(slice(None), slice(None)) + idx].ravel()
                lo, hi = np.quantile(x, [(1 - prob) / 2, (1 + prob) / 2])
                rows.append({"parameter": label, "mean": x.mean(), "sd": x.std(ddof=1), "lower": lo, "upper": hi})
        table = pd.DataFrame(rows).set_index("parameter")
        diag = self._diagnostics_table()
        if diag is not None:  # matched by (variable, index): the table's row labels may lack the coordinates
            cols = ["r_hat", "ess_bulk", "ess_tail"]
            by_key = dict(zip(zip(diag["name"], map(tuple, diag["index"])), diag[cols].to_numpy()))
            missing = np.full(len(cols), np.nan)
            table[cols] = np.array([by_key.get(key, missing) for key in keys]).reshape(len(keys), len(cols))
        table.attrs["level"] = table.attrs["prob"] = prob
        return table

    def __repr__(self) -> str:
        if isinstance(self, ConfusionFit):
            est = (f"n_annotators={self.n_annotators}, n_classes={self.n_classes}, classes={list(self.classes)}, "
                   f"n_groups={self.n_groups}")
        else:
            prev = self.prevalence
            est = f"channel={self.channel!r}" + ("" if prev is None else f", prevalence={np.round(prev, 4).tolist()}")
        extra = ""
        if self.n_chains:
            extra = f", n_chains={self.n_chains}, n_draws={self.n_draws}, n_divergent={self.n_divergent}"
        if self.method == "em" and "path" in self.details:
            # How EM ran (issue 16): which sufficient statistics, which orientation rule, flagged annotators.
            table = self.details.get("annotators")
            n_flag = 0 if table is None else int((table["flag"] != "ok").sum())
            extra += (f", path={self.details['path']!r}, orientation={self.details.get('orientation', 'every')!r}, "
                      f"n_flagged={n_flag}")
        elif isinstance(self, ConfusionFit) and self.n_chains == 0:
            extra += f", path={self.path!r}, converged={self.converged}, loglik={self.loglik:.6g}"
        return f"{type(self).__name__}(model={self.model!r}, method={self.method!r}, {est}{extra})"


def check_fitted_data(data, n_items: int, n_annotators: int, n_classes: int, func: str = "clean_label_probability"):
    """ValueError unless ``data`` has the fit's numbers of items, annotators and classes."""
    got = (int(data.n_items), int(data.n_annotators), int(getattr(data, "n_classes", 2)))
    if got != (n_items, n_annotators, n_classes):
        raise ValueError(f"{func}: `data` has {got[0]} items, {got[1]} annotators, {got[2]} classes; the fit has "
                         f"{n_items}, {n_annotators}, {n_classes}. Pass the data the model was fitted to.")


def _default_prior():
    from .priors import DEFAULT_PRIOR

    return DEFAULT_PRIOR


def _platt_columns(inp):
    """``(labels, annotator)`` of a Platt fit's responses as columns: (n_items, n_columns) int8 (-1 missing) and the
    annotator of each column (n_columns,). One column per annotator, unless an annotator labelled an item more
    than once: then each repeat is a column of its own with that annotator's channel
    (:func:`~noisycal_bayes.data.columns.response_columns`), a factor of the likelihood like any response."""
    item, ann, lab = (np.asarray(v) for v in (inp.item, inp.annotator, inp.label))
    order = np.lexsort((ann, item))
    if not repeated_runs(pair_keys(item[order], ann[order], inp.n_annotators))[0].any():
        dense = np.full((inp.n_items, inp.n_annotators), -1, dtype=np.int8)
        dense[item, ann] = lab
        return dense, np.arange(inp.n_annotators)
    resp = AnnotationSet.from_responses(item, ann, lab, n_items=inp.n_items, n_annotators=inp.n_annotators)
    cols = response_columns(resp, np.ones(inp.n_annotators, bool), func="clean_label_probability")
    return cols.labels, cols.annotator


# ------------------------------------------------------------------------------------------------ K classes
@dataclass(frozen=True, eq=False, kw_only=True, repr=False)
class ConfusionFit(FitResult):
    """A K-class fit (every K-class kind): confusion matrices and class prevalences, a :class:`FitResult`.

    Attributes
    ----------
    confusion : ndarray of shape (n_annotators, K, K)
        ``confusion[j, y, a] = P(A_j = a | Y = y)``, oriented (rule K3 of :mod:`noisycal_bayes.core.starts`); the
        draws (n_draws_total, n_annotators, K, K) for :class:`MulticlassPosterior`.
    prevalence : ndarray of shape (n_groups, K)
        Clean-label class frequencies per score group ((n_draws_total, n_groups, K) for the posterior).
    groups : ndarray of int, shape (n_items,)
        The group of each item.
    classes : tuple
        Class names; index ``k`` <-> ``classes[k]``.
    model : str
    method : {"em", "map", "nuts"}
        The binary fields of :class:`FitResult` keep their defaults: ``channel``, ``fpr``, ``inputs``... are None.
    """

    confusion: np.ndarray = field()
    prevalence: np.ndarray = field()
    groups: np.ndarray = field()
    classes: tuple = field()
    model: str = field()
    method: str = "em"
    channel: Channel | None = None
    point: dict = field(default_factory=dict)
    inputs: ModelInputs | None = None

    #: Floor of the probabilities inside the logs of :meth:`clean_label_probability` (EM: its E-step's 1e-12).
    LOG_FLOOR = 1e-12

    @view
    def n_groups(self) -> int:
        return int(np.shape(self.prevalence)[-2])

    @property
    def dims(self) -> dict:
        dims = {"confusion": ("annotator", "true_class", "label_class"), "prevalence": ("group", "true_class")}
        if getattr(self, "population_confusion", None) is not None:  # the pooled posterior
            dims["population_confusion"] = ("true_class", "label_class")
        return {**dims, **{name: () for name in getattr(self, "extra_draws", {})}}

    @property
    def coords(self) -> dict:
        k, ids = self.n_classes, self.annotator_ids
        classes = list(self.classes) if len(self.classes) == k else list(range(k))
        return {"annotator": list(ids) if ids else list(range(self.n_annotators)), "true_class": classes,
                "label_class": classes, "group": list(range(self.n_groups))}

    def _values(self) -> tuple[dict, bool]:
        return {"confusion": self.confusion, "prevalence": self.prevalence}, False

    def usable_annotators(self, *, max_condition: float = MAX_CONDITION) -> np.ndarray:
        """:func:`~noisycal_bayes.core.usable_confusions` of the fitted confusions (the posterior mean for draws),
        shape (n_annotators,) bool."""
        conf = np.asarray(self.confusion)
        with x64():
            return np.asarray(usable_confusions(conf.reshape((-1,) + conf.shape[-3:]).mean(axis=0),
                                                max_condition=max_condition))

    def _item_values(self, what: str, data, *, max_values, max_draws):
        """The K-class kernel: ``log P(A_i)`` per draw (``what="loglik"``, shape (n_samples, n_items)) or the
        clean-label posterior averaged over the (thinned) draws (shape (n_items, K)), in float64."""
        func = "log_likelihood" if what == "loglik" else "clean_label_probability"
        n = int(np.shape(self.groups)[0])
        if data is not None:
            x = class_arrays(data, func)
            check_fitted_data(x, n, self.n_annotators, self.n_classes, func)
            item, ann, lab, gold = x.item, x.annotator, x.label, x.gold
        elif getattr(self, "table", None) is not None:
            item, ann, lab, _, gold = (np.asarray(a) for a in self.table)
        else:
            raise ValueError(f"{func}: a K-class {self.method.upper()} fit keeps no responses; pass the data it was "
                             "fitted to.")
        conf, prev = np.asarray(self.confusion), np.asarray(self.prevalence)
        conf, prev = conf.reshape((-1,) + conf.shape[-3:]), prev.reshape((-1,) + prev.shape[-2:])
        if max_draws is not None:
            pick = np.unique(np.linspace(0, conf.shape[0] - 1, check_positive_int(max_draws, name="max_draws")).astype(int))
            conf, prev = conf[pick], prev[pick]
        if max_values is not None and conf.shape[0] * n > max_values:
            raise ValueError(f"the result would have {conf.shape[0] * n} values (> max_values={max_values}).")
        group = np.asarray(self.groups)
        with np.errstate(divide="ignore"):  # a floor of 0 (MAP): log 0 = -inf, as the fit's own likelihood
            log_c, log_p = np.log(np.clip(conf, self.LOG_FLOOR, 1.0)), np.log(np.clip(prev, self.LOG_FLOOR, 1.0))
        if conf.shape[0] > 1:  # draws: one compiled scan, several times a NumPy loop's speed (docs/performance.md)
            table = sparse_table(item, ann, lab, group, gold)
            with x64():
                return np.asarray(_class_draw_values(table_args(table), log_c, log_p, loglik=what == "loglik"))
        # One estimate: NumPy, nothing to compile.
        lj = rows_class_log_joint(item, ann, lab, n, group, gold, log_c[0], log_p[0])
        total = logsumexp_rows(lj)
        return total[None] if what == "loglik" else np.exp(lj - total[:, None])


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)
class _ConfusionEstimate(ConfusionFit):
    """What the K-class EM and MAP fits hold besides the estimate (``loglik`` is ``log_likelihood``)."""

    n_groups: int = field()
    log_likelihood: float = field()
    n_iter: int = field()
    converged: bool = field()
    path: str = field()

    def __post_init__(self):
        object.__setattr__(self, "loglik", float(self.log_likelihood))


@dataclass(frozen=True, kw_only=True, repr=False)
class MulticlassEMFit(_ConfusionEstimate):
    """A K-class EM (or MAP-EM) fit of the (grouped) Dawid-Skene model (``fit_em`` / ``fit_em_multiclass``).

    Attributes
    ----------
    confusion, prevalence, groups, classes, model ({"grouped", "dawid_skene", "pooled"}), n_groups, n_iter, warnings
        As in :class:`ConfusionFit` and :class:`FitResult`.
    log_likelihood, loglik : float
        At the estimate (without the prior's log density for MAP; gold items: ``log p(Y = gold, A)``); = ``loglik``.
    converged : bool
        The selected start converged and satisfies the orientation rule.
    path, path_reason, groups_reason : str
        ``"patterns"`` or ``"sparse"``, and why that path and those groups.
    objective : float
        Log-likelihood plus the Dirichlet log-kernels (equals ``log_likelihood`` without a prior).
    start_logliks : ndarray of shape (n_starts_total,)
        Final objective of every start (NaN where non-finite); start 0 is the majority-vote start (or ``init``).
    selected_start : int
    loglik_trace : ndarray
        Objective at the start and after each iteration of the selected start.
    label_permutation : tuple or None
        The relabelling applied to the selected start (rule K3), ``None`` when none was needed.
    prior : tuple of ndarray or None
        Dirichlet concentrations ``(alpha_confusion (K, K), alpha_prevalence (K,))`` for MAP, None for ML.
    n_labels : ndarray of shape (n_annotators,)
        Responses per annotator.
    annotator_scale : ndarray of shape (n_annotators,) or None
        ``model="pooled"`` with ``spread``: annotator ``j``'s rows are ``Dirichlet(annotator_scale[j] * prior[0][y])``
        (:func:`~noisycal_bayes.inference.population.fit_em_population`); None otherwise (every factor 1).
    mixture_alpha, mixture_weight, type_probability : ndarray or None
        ``model="pooled"`` with ``components`` > 1 (a mixture population of annotator types): the components'
        Dirichlet parameters (M, K, K) (rows in the fit's class order), their weights (M,), and each annotator's
        type responsibilities (n_annotators, M); annotator ``j``'s rows given type ``c`` are
        ``Dirichlet(n_jy + mixture_alpha[c, y])`` a posteriori. None otherwise.
    """

    objective: float = np.nan
    start_logliks: np.ndarray = field(default_factory=lambda: np.zeros(0))
    selected_start: int = 0
    loglik_trace: np.ndarray = field(default_factory=lambda: np.zeros(0))
    path_reason: str = ""
    groups_reason: str = ""
    label_permutation: tuple | None = None
    prior: tuple | None = None
    n_labels: np.ndarray = field(default_factory=lambda: np.zeros(0))
    annotator_scale: np.ndarray | None = None
    mixture_alpha: np.ndarray | None = None
    mixture_weight: np.ndarray | None = None
    type_probability: np.ndarray | None = None


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)
class MulticlassMAPFit(_ConfusionEstimate):
    """Posterior mode of a K-class channel model (``fit_map`` / ``fit_map_multiclass``); the attribute names of
    :class:`MulticlassEMFit`.

    Attributes
    ----------
    confusion, prevalence, groups, n_groups, log_likelihood, n_iter, path, model, classes, warnings
        As in :class:`MulticlassEMFit`; ``converged``: the EM stopping rule was met within ``max_iter``.
    log_posterior : float
        ``log p(A | theta) + log p(theta)`` in simplex coordinates (up to the Dirichlet normalisers).
    """

    method: str = "map"
    log_posterior: float = np.nan
    LOG_FLOOR = 0.0  # no floor: the mode's own likelihood (its Dirichlet prior keeps the cells positive)


@dataclass(frozen=True, eq=False, kw_only=True, repr=False)
class MulticlassPosterior(ConfusionFit):
    """Posterior draws of a K-class channel model (``fit_nuts`` / ``fit_nuts_multiclass``).

    Attributes
    ----------
    confusion : ndarray of shape (n_draws_total, n_annotators, K, K)
        Draws of ``C[j, y, a]``, chains flattened (chain-major: draw ``c * n_draws + d``).
    prevalence : ndarray of shape (n_draws_total, n_groups, K)
    groups : ndarray of shape (n_items,), int32
    diagnostics : dict
        ``max_rhat``, ``min_ess_bulk``, ``frac_max_treedepth``, ``n_divergent``, ``frac_not_dominant``
        (draws whose average confusion is not diagonally dominant).
    classes : tuple
    model : str
    n_chains, n_draws : int
    population_confusion : ndarray of shape (n_draws_total, K, K) or None
        Pooled model: the population's typical confusion ``softmax([0, mu_y])`` per row.
    sample_stats : dict of name -> ndarray (n_chains, n_draws)
    diagnostics_table : DataFrame
        R-hat and bulk/tail ESS per scalar (:func:`~noisycal_bayes.inference.mcmc_diagnostics`).
    start : MulticlassMAPFit or None
        The MAP-EM fit the chains started from (None when ``init`` gave the start).
    settings : dict
    warnings : tuple of str
    table : SparseTable
        The responses, sorted by item, with the items' groups and gold labels.
    """

    method: str = "nuts"
    diagnostics: dict = field()
    n_chains: int = field()
    n_draws: int = field()
    population_confusion: np.ndarray | None = None
    sample_stats: dict = field(default_factory=dict)
    diagnostics_table: object = None
    start: MulticlassMAPFit | None = None
    annotator_ids: tuple | None = None
    table: SparseTable | None = None
    extra_draws: dict = field(default_factory=dict)
    LOG_FLOOR = 1e-300

    def _values(self) -> tuple[dict, bool]:
        out = {"confusion": self.confusion, "prevalence": self.prevalence}
        if self.population_confusion is not None:
            out["population_confusion"] = self.population_confusion
        return {name: self._per_draw(v) for name, v in {**out, **self.extra_draws}.items()}, True

    def _diagnostics_table(self) -> pd.DataFrame | None:
        return self.diagnostics_table

    def _observed_data(self) -> dict:
        t = self.table
        return {"response_item": (("response",), np.asarray(t.item)),
                "response_annotator": (("response",), np.asarray(t.annotator)),
                "labels": (("response",), np.asarray(t.label)), "group": (("item",), np.asarray(t.item_group)),
                "gold": (("item",), np.asarray(t.gold)), "coords": {"item": np.arange(np.shape(t.item_group)[0])}}

    def log_likelihood(self, *, per: str = "item", max_values: int | None = None) -> np.ndarray:
        """Per-item log-likelihood of every draw, shape (n_chains, n_draws, n_items) (``per="item"`` only)."""
        if per != "item":
            raise ValueError(f"`per` must be 'item' for a K-class posterior (its rows are the items); got {per!r}.")
        return self._per_draw(self._item_values("loglik", None, max_values=max_values, max_draws=None))


@partial(jax.jit, static_argnames="loglik")
def _class_draw_values(args, log_conf, log_prev, *, loglik: bool):
    """Per draw ``log P(A_i)`` (n_draws, n_items) (``loglik``), else the mean over draws of ``P(Y_i = y | A_i)``
    (n_items, K), on a :class:`~noisycal_bayes.core.tables.SparseTable`'s arrays (:func:`class_log_joint`)."""
    table = SparseTable(*args)

    def step(acc, theta):
        lj = class_log_joint(table, *theta)
        total = jax.nn.logsumexp(lj, axis=-1)
        return (acc if loglik else acc + jnp.exp(lj - total[:, None])), (total if loglik else None)

    acc, rows = jax.lax.scan(step, jnp.zeros((table.item_group.shape[0], log_conf.shape[-1]), log_conf.dtype),
                             (log_conf, log_prev))
    return rows if loglik else acc / log_conf.shape[0]
