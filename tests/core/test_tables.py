"""The array containers of core (noisycal_bayes/core/tables.py) and the shared checkers they rely on."""
import pickle

import jax
import numpy as np
import pytest

from noisycal_bayes._validation import PROBS_TOL, check_confusion, check_probs
from noisycal_bayes.core import classwise_ece, top_label_ece
from noisycal_bayes.core.tables import BinStats, PatternTable, Responses, SparseTable
from noisycal_bayes.data import AnnotationSet, Binning


def test_containers_are_pytrees():
    r = Responses(np.array([0, 1]), np.array([0, 0]), np.array([1, 0]))
    doubled = jax.tree.map(lambda x: 2 * x, r)
    assert isinstance(doubled, Responses) and doubled.item.tolist() == [0, 2]
    for cls in (PatternTable, SparseTable, BinStats):
        assert issubclass(cls, tuple)


def test_annotation_set_pickled_before_the_move_still_loads():
    data = AnnotationSet.from_responses([0, 0, 1], [0, 1, 0], [1, 0, 1])
    # A pickle written when Responses lived in data.responses names that module; it must still resolve there.
    old = pickle.dumps(data, protocol=0).replace(b"noisycal_bayes.core.tables", b"noisycal_bayes.data.responses")
    assert b"noisycal_bayes.data.responses" in old
    back = pickle.loads(old)
    assert isinstance(back.responses, Responses)
    assert np.array_equal(back.responses.label, data.responses.label)


def test_check_probs_names_items_by_id_or_position():
    p = np.array([[0.5, 0.5], [0.7, 0.7]])
    with pytest.raises(ValueError, match=r"items \[1\] sum to"):
        check_probs(p)
    with pytest.raises(ValueError, match=r"items \['b'\] sum to"):
        check_probs(p, ids=["a", "b"])
    with pytest.raises(ValueError, match=r"shape \(n_items, n_classes\)"):
        check_probs(np.ones(3))
    near = np.array([[0.5, 0.5 + 0.5 * PROBS_TOL]])
    assert check_probs(near).shape == (1, 2)


def test_check_confusion_shapes_and_rows():
    assert check_confusion(np.eye(3)).shape == (1, 3, 3)
    with pytest.raises(ValueError, match=r"rows must sum to 1"):
        check_confusion([[0.9, 0.2], [0.1, 0.9]])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        check_confusion([[1.5, -0.5], [0.0, 1.0]])


def test_core_ece_takes_a_binning_without_importing_data():
    # core reads any object with ``edges_for`` (a Binning): equal-width edges equal the int form.
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(3), size=200)
    t = np.eye(3)[rng.integers(0, 3, size=200)]
    a = top_label_ece(p, t, bins=Binning.from_edges(np.linspace(0, 1, 11)))
    b = top_label_ece(p, t, bins=10)
    assert a.value == pytest.approx(b.value, abs=1e-12)
    per_class = classwise_ece(p, t, bins=Binning.equal_mass(4))
    assert per_class.edges.shape == (3, 5)
    with pytest.raises(ValueError, match="positive integer"):
        top_label_ece(p, t, bins="ten")
