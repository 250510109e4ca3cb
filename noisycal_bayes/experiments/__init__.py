"""The paper's experiments (Hanada & Futami §6 and Appendix G), each a function returning a pandas table.

Top of the dependency graph: these modules import ``reference``, ``inference``, ``propagate``,
``recalibration`` and ``simulate``; nothing in the package imports them. Defaults are the paper's full
sizes; ``benchmarks/experiments/`` drives them and ``docs/experiments.md`` shows the tables.

* :func:`toy_ece` / :func:`summarise_toy` — toy NC-ECE estimation (§6.1, Table 1, Figure 1).
* :func:`gaussian_recalibration` / :func:`summarise_gaussian` — Gaussian recalibration (Appendix G.2, Table 5).
* :func:`tabular_recalibration` / :func:`summarise_tabular` — semi-synthetic tabular recalibration (§6.2,
  Table 2); needs scikit-learn (``pip install noisycal_bayes[experiments]``), imported only when called.
* :func:`cifar10n_table` — CIFAR-10N real label noise (§6.3, Table 3). The data file is not bundled: pass
  ``path=`` or set the environment variable ``NOISYCAL_CIFAR10N`` (:func:`cifar10n_path` resolves it).
"""
from .cifar10n import cifar10n_path, cifar10n_table, load_cifar10n
from .gaussian import gaussian_recalibration, simulate_gaussian, summarise_gaussian
from .tabular import load_tabular, summarise_tabular, tabular_recalibration
from .toy import summarise_toy, toy_ece

__all__ = ["cifar10n_path", "cifar10n_table", "gaussian_recalibration", "load_cifar10n", "load_tabular", "simulate_gaussian",
           "summarise_gaussian", "summarise_tabular", "summarise_toy", "tabular_recalibration", "toy_ece"]
