"""Fixtures shared by the reliability tests."""
import fcntl
from pathlib import Path

import pytest

# Next to the suite's JAX cache (tests/conftest.py): a lock file, never a cache entry.
_LOCK = Path(__file__).resolve().parents[2] / ".pytest_cache" / "tiny_bad_nuts.lock"


@pytest.fixture(scope="session")
def tiny_bad_nuts():
    """``fit(seed)``: a deliberately bad NUTS set-up that diverges, kept tiny so it compiles once and runs fast.

    60 items, 3 annotators, the marginal model, one chain, 30 warm-up iterations and a target acceptance
    of 0.05 (step-size adaptation then aims for huge steps): measured here, every post-warm-up transition
    diverges. The compiled sampler is cached per process, so later calls with other seeds take < 1 s.

    The first fit of each process holds a file lock: on a cold cache both xdist workers used to compile this
    sampler at the same time (~14 s CPU each, test_hard_cases and test_determinism start together); now the
    second worker waits and loads the programs the first one saved (tests/conftest.py's cache).
    """
    from noisycal_bayes import simulate_annotations
    from noisycal_bayes.inference import fit_nuts

    data = simulate_annotations(60, fpr=[0.1, 0.2, 0.15], tpr=[0.9, 0.8, 0.85], seed=3).data
    first = [True]

    def _fit(seed):
        return fit_nuts(data, model="dawid_skene", n_chains=1, n_warmup=30, n_draws=60, target_accept=0.05,
                        seed=seed, progress_bar=False)

    def fit(seed):
        if not first[0]:
            return _fit(seed)
        _LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(_LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                result = _fit(seed)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        first[0] = False
        return result

    return fit
