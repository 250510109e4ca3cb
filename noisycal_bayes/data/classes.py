"""Class names and class indices: the label alphabet of an annotation set.

A label is stored as a class index ``k`` in ``0 .. K - 1`` (-1 = missing); the class it stands for is
``classes[k]``, the name as the user gave it: an ``int`` (3, 3.0 and ``np.int64(3)`` are the class 3) or a
non-empty ``str``. Inferred classes are sorted, integers numerically first, then strings alphabetically;
binary data are the classes ``(0, 1)``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .._validation import _preview

#: The class index of a missing label (dense label matrices, gold vectors).
MISSING = -1
_INT16_MAX = int(np.iinfo(np.int16).max)


def _class_name(value):
    """A label value as a class name: ``int`` for integral numbers (3, 3.0, np.int64(3)), ``str`` for strings.

    Returns None for values that cannot name a class (NaN, non-integral floats, booleans, other objects).
    """
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return int(value) if math.isfinite(value) and float(value).is_integer() else None
    if isinstance(value, (str, np.str_)):
        return str(value) if str(value).strip() else None
    return None


def _sorted_classes(names) -> tuple:
    """Sorted class names: integers numerically first, then strings alphabetically."""
    return tuple(sorted(set(names), key=lambda c: (isinstance(c, str), c)))


def _check_classes(classes) -> tuple:
    """``classes=`` as a tuple of distinct class names (ints or strings), at least two of them."""
    if isinstance(classes, (str, bytes)) or not hasattr(classes, "__iter__"):
        raise ValueError(f"`classes` must be a sequence of class names (integers or strings); got {classes!r}.")
    raw = list(classes)
    names = [_class_name(c) for c in raw]
    bad = [c for c, n in zip(raw, names) if n is None]
    if bad:
        raise ValueError(f"`classes` must hold integers or non-empty strings; got {_preview(bad)}.")
    dup = sorted({c for c in names if names.count(c) > 1}, key=str)
    if dup:
        raise ValueError(f"`classes` must be distinct; {_preview(dup)} appear more than once.")
    if len(names) < 2:
        raise ValueError(f"`classes` must name at least two classes; got {names}.")
    if len(names) > _INT16_MAX:
        raise ValueError(f"{len(names)} classes exceed the int16 labels of the responses ({_INT16_MAX}).")
    if MISSING in names:
        raise ValueError("`classes` may not contain -1, which marks a missing label.")
    return tuple(names)


def _encode(values, classes, *, what: str, where) -> tuple:
    """Class indices (int16) of the class names ``values`` (m,) (none missing) and the class tuple (``classes``, or
    inferred when None); ``what`` names the input and ``where(mask)`` the offending positions in messages. One
    ``pd.factorize``; only the distinct values are converted in Python."""
    codes, uniques = pd.factorize(pd.Series(np.asarray(values, dtype=object)))
    uniques = list(uniques)
    names = [_class_name(u) for u in uniques]
    not_names = np.asarray([n is None for n in names], dtype=bool)
    if not_names.any():
        bad = not_names[codes]
        raise ValueError(f"{what} must hold class names (integers or strings); got "
                         f"{_preview([uniques[k] for k in np.flatnonzero(not_names)][:5])} {where(bad)}.")
    if MISSING in names:
        bad = codes == names.index(MISSING)
        raise ValueError(f"{what} holds -1 {where(bad)}, the marker of a missing label. Drop those responses.")
    if classes is None:
        classes = _sorted_classes(names)
        if len(classes) < 2:
            raise ValueError(f"{what} holds a single class {list(classes)}; pass classes= to name the others.")
    index = {c: k for k, c in enumerate(classes)}
    outside = np.asarray([n not in index for n in names], dtype=bool)
    if outside.any():
        bad = outside[codes]
        raise ValueError(f"{what} holds {_preview([names[k] for k in np.flatnonzero(outside)])}, which are not among "
                         f"the classes {_preview(list(classes))}, {where(bad)}. Add them to `classes` or fix the "
                         "labels.")
    lookup = np.asarray([index[n] for n in names], dtype=np.int16)
    return lookup[codes], classes
