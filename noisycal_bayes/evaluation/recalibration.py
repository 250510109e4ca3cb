"""Recalibration maps compared on held-out items (``evaluate(..., recalibration=True)``)."""
from __future__ import annotations

import numpy as np

from .engines import Settings, _require_identified
from .result import RecalibrationRow
from ..report.rows import describe_labels, label_weights  # re-exported: the corrected labels' models

__all__ = ["MAPS", "compare_recalibration", "describe_labels", "describe_map", "label_weights"]

MAPS = {"temperature": "TemperatureScaling", "platt": "PlattScaling", "histogram": "ProjectedHistogram"}


def _map_classes():
    from ..recalibration import maps

    return {name: getattr(maps, cls) for name, cls in MAPS.items()}


def describe_map(m) -> str:
    """The fitted parameters of a recalibration map, as one short line."""
    if hasattr(m, "temperature_"):
        return f"T = {m.temperature_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "alpha_"):
        return f"alpha = {m.alpha_:.3f}, beta = {m.beta_:.3f}" + (" (boundary)" if m.on_boundary_ else "")
    if hasattr(m, "bin_values_"):
        return f"{len(m.bin_values_)} bins, {len(m.clipped_bins_)} clipped"
    return ""


def _stacked_labels(parts: list, weights: list):
    """The weighted mixture of :class:`~noisycal_bayes.reference.recalibration.CorrectedLabels` (values and annotator
    weights), the weights summing to 1."""
    from ..reference.recalibration import CorrectedLabels

    w = np.asarray(weights, np.float64) / np.sum(weights)
    return CorrectedLabels(sum(wk * p.values for wk, p in zip(w, parts)),
                           sum(wk * np.asarray(p.weights, np.float64) for wk, p in zip(w, parts)), parts[0].weights_rule)


def compare_recalibration(data, settings: Settings, *, clean_labels=None,
                          maps=("temperature", "platt", "histogram"), expansion=None) -> list:
    """Fit each map on one half of the items (corrected, and naive against votes); judge on the other half.

    Channels are fitted by EM (:func:`noisycal_bayes.fit_em`) on the fitting half; NC-ECE on the held-out
    half uses those channels (independent samples, paper §3 variant (i)). With ``clean_labels`` the
    oracle ECE is added. Reached through ``evaluate(..., recalibration=True)``.

    **After a model expansion** (``expansion``, :func:`~noisycal_bayes.evaluation.expansion.expand_models`) whose
    weight is not all on the shared channels, the corrected labels follow the headline's model: the score-dependent
    model is fitted on the fitting half too (``fit_map(model="score_dependent")``, the registered fit, MAP), every
    item of either half is corrected at its own score group's channel
    (:func:`~noisycal_bayes.reference.recalibration.corrected_item_labels` of that fit) and the labels used to fit
    the corrected maps and to judge every map are the stacking-weighted mixture ``sum_m w_m Ytilde_m,i`` of the
    models' corrected labels (the expansion's weights, from all items). Why corrected labels and not the models'
    clean-label probabilities ``P_m(Y_i = 1 | labels, group)``: those shrink every item towards its group's
    prevalence ``pi_g``, which is the calibration curve being judged (a map that follows the group prevalences
    would look calibrated by construction), while ``Ytilde_m`` is unbiased for ``Y_i`` given model ``m``'s channels
    and involves no prevalence; and the corrected losses of the maps (and the held-out NC-ECE's bin sums) are
    linear in the labels, so fitting to the mixture minimises ``sum_m w_m`` times each model's unbiased estimate of
    the clean loss. With the weight all on the shared model nothing changes (no second fit). The rows' ``fitted_to``
    names the model (:func:`describe_labels`).

    Returns
    -------
    list of RecalibrationRow
        The raw scores first, then each map fitted to each kind of label.
    """
    from ..core import binned_abs_residual, x64
    from ..data import as_binning, bin_index
    from ..inference import fit_em
    from ..reference.calibration import ece
    from ..reference.recalibration import corrected_item_labels

    s = settings
    perm = np.random.default_rng(s.seed).permutation(data.n_items)
    fit_rows, test_rows = np.sort(perm[: data.n_items // 2]), np.sort(perm[data.n_items // 2:])
    fit_data, test_data = data.subset(fit_rows), data.subset(test_rows)
    if fit_data.n_annotators != data.n_annotators or test_data.n_annotators != data.n_annotators:
        raise ValueError("an annotator has no label in one half of the items; too few labels to compare "
                         "recalibration maps on held-out items.")
    ch = fit_em(fit_data, groups=s.groups, n_starts=s.n_starts, seed=s.seed)
    _require_identified(ch, "EM on the fitting half")
    y_test = None if clean_labels is None else np.asarray(clean_labels)[test_rows]
    z_fit, z_test = fit_data.scores, test_data.scores
    mix = label_weights(expansion)
    if set(mix) == {"shared"}:
        corrected = ("noisy labels, corrected", fit_data, {"channel": ch.channel, "weights": s.weights})
        # The held-out items' corrected labels do not depend on the map, only their scores do: NC-ECE of a
        # recalibrated score vector is then sum_k |sum_{B_k} (Ytilde_i - z_i)| / n with Ytilde fixed.
        y_corr = corrected_item_labels(test_data, ch.channel, weights=s.weights).values
    else:
        from ..inference import fit_map

        rich = fit_map(fit_data, model="score_dependent", groups=s.groups, seed=s.seed)
        _require_identified(rich, "the score-dependent MAP on the fitting half")
        fits = {"shared": ch.channel, "score_dependent": rich}

        def stacked(part):
            return _stacked_labels([corrected_item_labels(part, fits[m], weights=s.weights) for m in mix],
                                   list(mix.values()))

        corrected = (describe_labels(mix), stacked(fit_data), {})
        y_corr = stacked(test_data).values
    edges = as_binning(s.bins).edges_for(z_test)

    def judge(name, fitted_to, params, z):
        with x64():
            nc = float(binned_abs_residual(bin_index(z, edges), y_corr - z, edges.size - 1))
        orc = None if y_test is None else ece(z, y_test, bins=s.bins)
        return RecalibrationRow(name, fitted_to, params, nc, orc)

    rows = [judge("none", "-", "raw scores", z_test)]
    targets = [corrected, ("majority vote", fit_data.majority_vote(), {}),
               ("vote fraction", fit_data.vote_fraction(), {})]
    classes = _map_classes()
    for name in maps:
        for fitted_to, y, kw in targets:
            m = classes[name](bins=s.bins) if name == "histogram" else classes[name]()
            m.fit(z_fit, y, **kw)
            rows.append(judge(name, fitted_to, describe_map(m), m.predict(z_test)))
    return rows
