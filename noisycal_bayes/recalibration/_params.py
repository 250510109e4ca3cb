"""scikit-learn's parameter protocol without depending on scikit-learn.

:class:`ParamsMixin` gives ``get_params(deep=True)``, ``set_params(**params)`` and a scikit-learn-like
``__repr__`` (only the parameters that differ from their defaults), read off the keyword parameters of the
class's ``__init__`` as :class:`sklearn.base.BaseEstimator` does. With it ``sklearn.base.clone`` works on
the recalibration maps, and they sit in grid searches and pipelines' parameter plumbing.

Contract for subclasses (the same as scikit-learn's): ``__init__`` takes keyword parameters only (no
``*args`` / ``**kwargs``), stores each one unchanged under its own name and does nothing else; fitted
values end with an underscore and are set by ``fit``.
"""
from __future__ import annotations

import inspect
from collections import defaultdict


class ParamsMixin:
    """``get_params`` / ``set_params`` / ``__repr__`` from the ``__init__`` signature (scikit-learn's protocol)."""

    @classmethod
    def _get_param_names(cls) -> list:
        """Sorted names of the ``__init__`` parameters."""
        init = cls.__init__
        if init is object.__init__:
            return []
        params = list(inspect.signature(init).parameters.values())[1:]
        bad = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if bad:
            raise TypeError(f"{cls.__name__}.__init__ must list its parameters explicitly (scikit-learn's "
                            f"convention); it has *args/**kwargs {bad}.")
        return sorted(p.name for p in params)

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this map, as passed to ``__init__``.

        Parameters
        ----------
        deep : bool, default True
            Also return the parameters of parameter values that are estimators themselves (as
            ``<name>__<parameter>``), as :meth:`sklearn.base.BaseEstimator.get_params` does.

        Returns
        -------
        dict
            Parameter name -> value.
        """
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params):
        """Set parameters (``name=value``, or ``name__sub=value`` for a nested estimator); returns self.

        Fitted attributes are kept: refit after changing parameters.

        Raises
        ------
        ValueError
            A name that is not a parameter of this map (all unknown names are listed with the valid ones).
        """
        if not params:
            return self
        valid = self.get_params(deep=True)
        # A nested name must be a parameter of the current sub-estimator (unless the same call replaces it).
        unknown = sorted(k for k in params if k.partition("__")[0] not in valid
                         or ("__" in k and k not in valid and k.partition("__")[0] not in params
                             and hasattr(valid[k.partition("__")[0]], "get_params")))
        if unknown:
            raise ValueError(f"invalid parameter(s) {unknown} for {type(self).__name__}; valid parameters are "
                             f"{sorted(valid)}.")
        # Check everything before changing anything, so that a failed call leaves the map as it was.
        direct, nested = {}, defaultdict(dict)
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if not sep:
                direct[name] = value
                continue
            target = direct.get(name, valid[name])
            if not hasattr(target, "set_params"):
                raise ValueError(f"{type(self).__name__}: parameter {name!r} is a {type(target).__name__}, not an "
                                 f"estimator; {key!r} cannot set a sub-parameter of it.")
            nested[name][sub] = value
        for name, value in direct.items():
            setattr(self, name, value)
        for name, sub in nested.items():
            getattr(self, name).set_params(**sub)
        return self

    def __repr__(self) -> str:
        """``ClassName(p=v, ...)`` with the parameters that differ from their defaults (scikit-learn's style)."""
        sig = inspect.signature(type(self).__init__).parameters
        changed = []
        for name, value in self.get_params(deep=False).items():
            default = sig[name].default
            if value is default or (default is not inspect.Parameter.empty and _same(value, default)):
                continue
            changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"


def _same(a, b) -> bool:
    """Equal for the repr (``==`` where it gives one bool, else equal reprs; NaN equals NaN)."""
    try:
        eq = a == b
        if isinstance(eq, bool):
            return eq or (a != a and b != b)
    except Exception:  # noqa: BLE001 - any comparison failure means "compare reprs"
        pass
    return repr(a) == repr(b)
