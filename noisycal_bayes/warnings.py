"""Warning classes users can filter, e.g. ``warnings.simplefilter("ignore", SmallGapWarning)``."""


class NoisyCalWarning(UserWarning):
    """Base class of every statistical warning raised by noisycal_bayes."""


class IdentifiabilityWarning(NoisyCalWarning):
    """The design does not identify the channels (e.g. two annotators without score groups)."""


class SmallGapWarning(NoisyCalWarning):
    """A channel gap ``tpr - fpr`` is close to zero: corrected labels have huge variance."""


class ConvergenceWarning(NoisyCalWarning):
    """An optimiser or sampler did not converge, or MCMC diagnostics are poor."""


class DataWarning(NoisyCalWarning):
    """The input was usable but something was dropped or looks suspicious (e.g. unlabelled scores)."""


class BoundaryWarning(NoisyCalWarning):
    """A constrained fit ended on the boundary of its parameter box."""


class PriorWarning(NoisyCalWarning):
    """The prior's pseudo-counts are large against the data: posterior means are pulled towards the prior."""


class GroupsMeaningWarning(NoisyCalWarning, FutureWarning):
    """An int passed as ``groups=`` now means equal-width groups (as for ``bins=``); in noisycal_bayes <= 0.1 it meant equal mass."""
