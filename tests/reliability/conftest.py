"""Fixtures shared by the reliability tests."""
import pytest


@pytest.fixture(scope="session")
def tiny_bad_nuts():
    """``fit(seed)``: a deliberately bad NUTS set-up that diverges, kept tiny so it compiles once and runs fast.

    60 items, 3 annotators, the marginal model, one chain, 30 warm-up iterations and a target acceptance
    of 0.05 (step-size adaptation then aims for huge steps): measured here, every post-warm-up transition
    diverges. The compiled sampler is cached per process, so later calls with other seeds take < 1 s.
    """
    from noisycal_bayes import simulate_annotations
    from noisycal_bayes.inference import fit_nuts

    data = simulate_annotations(60, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], seed=3).data

    def fit(seed):
        return fit_nuts(data, model="dawid_skene", n_chains=1, n_warmup=30, n_draws=60, target_accept=0.05,
                        seed=seed, progress_bar=False)

    return fit
