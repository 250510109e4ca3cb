"""One EM step of the (grouped) Dawid-Skene model on compressed counts (paper Appendix F.1).

E-step: ``T_r = P(Y = 1 | pattern_r, g_r)``. M-step with optional Beta(alpha, beta) pseudo-counts
(MAP when a prior is given): ``pi_g = (sum_{r in g} c_r T_r + alpha_pi - 1) / (sum_{r in g} c_r + alpha_pi + beta_pi - 2)``,
``tpr_j = (sum_r c_r T_r A_rj + alpha - 1) / (sum_r c_r T_r O_rj + alpha + beta - 2)``, ``fpr_j`` the same with
``1 - T_r``. The flat prior (all ones) gives maximum likelihood.
"""
import jax

from .likelihood import posterior_positive


def em_step(patterns, group, counts, n_groups: int, fpr, tpr, prevalence, prior=None):
    """Return updated ``(fpr, tpr, prevalence)``.

    ``prior`` is None (maximum likelihood) or a tuple of Beta ``(alpha, beta)`` pairs
    ``((a_fpr, b_fpr), (a_tpr, b_tpr), (a_prev, b_prev))`` applied to fpr, tpr and prevalence.
    """
    t = posterior_positive(patterns, group, fpr, tpr, prevalence)
    w1 = counts * t
    w0 = counts - w1
    obs = (patterns >= 0).astype(w1.dtype)
    pos = (patterns == 1).astype(w1.dtype)
    (af, bf), (at, bt), (ap, bp) = ((1.0, 1.0),) * 3 if prior is None else prior
    n_g = jax.ops.segment_sum(counts, group, num_segments=n_groups)
    t_g = jax.ops.segment_sum(w1, group, num_segments=n_groups)
    prevalence = (t_g + ap - 1) / (n_g + ap + bp - 2)
    tpr = (w1 @ pos + at - 1) / (w1 @ obs + at + bt - 2)
    fpr = (w0 @ pos + af - 1) / (w0 @ obs + af + bf - 2)
    return fpr, tpr, prevalence
