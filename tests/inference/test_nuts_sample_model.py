"""``inference.nuts.sample_model``: any NumPyro model through the cached compiled NUTS program.

A conjugate model with a known posterior, so the draws can be checked against a closed form: ``p ~ Beta(a, b)``
and ``k`` successes in ``n`` trials (a factor) give ``p | k ~ Beta(a + k, b + n - k)``. The data and the prior
are traced arguments: a second data set of the same shape reuses the program (no new cache entry).
"""

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats

from noisycal_bayes.core import x64
from noisycal_bayes.inference import _sampler
from noisycal_bayes.inference.mcmc import mcmc_diagnostics
from noisycal_bayes.inference.nuts import sample_model


def _beta_binomial(k, n, ab):
    p = numpyro.sample("p", dist.Beta(ab[0], ab[1]))
    numpyro.factor("data", k * jnp.log(p) + (n - k) * jnp.log1p(-p))


def _run(k, n, ab, seed):
    with x64():
        return sample_model(_beta_binomial, (np.float64(k), np.float64(n), np.asarray(ab, np.float64)), {"p": 0.5},
                            name="test-beta-binomial", n_chains=1, n_warmup=200, n_draws=400, seed=seed)


@pytest.mark.slow  # compiles a NUTS program (~15 s on the loaded 2-core machine)
def test_sample_model_draws_the_conjugate_posterior_and_reuses_the_program():
    draws, stats_ = _run(7, 20, (2.0, 3.0), seed=0)
    assert draws["p"].shape == (1, 400) and stats_["diverging"].shape == (1, 400)
    n_programs = len(_sampler._PROGRAMS)
    draws2, _ = _run(30, 40, (1.0, 1.0), seed=1)  # other data and prior, same shapes: the same program
    assert len(_sampler._PROGRAMS) == n_programs
    for d, (a, b) in ((draws["p"], (9.0, 16.0)), (draws2["p"], (31.0, 11.0))):
        post = stats.beta(a, b)
        ess = float(mcmc_diagnostics({"p": d})["ess_bulk"].iloc[0])
        assert ess > 50, f"bulk ESS {ess:.0f}: too few effective draws to test the mean"
        # Monte Carlo se of the mean = posterior sd / sqrt(ESS); 4 se: false-alarm rate about 6e-5 per check.
        assert abs(d.mean() - post.mean()) < 4 * post.std() / np.sqrt(ess)
    # Negative control: the same tolerance rejects the first run's posterior mean for the second run's draws.
    ess2 = float(mcmc_diagnostics({"p": draws2["p"]})["ess_bulk"].iloc[0])
    assert abs(draws2["p"].mean() - stats.beta(9.0, 16.0).mean()) > 4 * stats.beta(31.0, 11.0).std() / np.sqrt(ess2)


def test_sample_model_rejects_bad_settings():
    with pytest.raises(ValueError, match="n_draws"):
        sample_model(_beta_binomial, (1.0, 2.0, (1.0, 1.0)), {"p": 0.5}, name="x", n_chains=1, n_warmup=10,
                     n_draws=0, seed=0)
