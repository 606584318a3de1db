"""The cheap module walks of sampled steps give what ``modules()`` / ``parameters()`` give,
and one walk per step serves every detector that asks."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from torchdoctor.runtime.detectors import tree  # noqa: E402


def _tangled() -> nn.Module:
    """Shared layers, a link back to the parent, a None slot, nested containers."""
    shared = nn.Linear(3, 3)
    root = nn.Module()
    root.encoder = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), shared)
    root.decoder = nn.Sequential(shared, nn.Sequential(nn.Linear(3, 2)))
    root.register_module("missing", None)
    root.encoder.add_module("parent", root)  # a cycle: named_modules() visits root once
    return root


def test_submodules_are_modules_in_the_same_order() -> None:
    models = (_tangled(), nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), nn.Linear(2, 2))
    for model in models:
        assert tree.submodules(model) == list(model.modules())


def test_parameters_in_holds_every_parameter_of_the_model() -> None:
    model = _tangled()
    found = tree.parameters_in(tree.submodules(model))
    assert {id(p) for p in found} == {id(p) for p in model.parameters()}


def test_a_replaced_layer_changes_the_walk() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    before = [id(p) for p in tree.parameters_in(tree.submodules(model))]
    model[1] = nn.Linear(2, 2)
    assert [id(p) for p in tree.parameters_in(tree.submodules(model))] != before


def test_one_walk_per_step_whoever_asks() -> None:
    model = nn.Sequential(nn.Linear(2, 2))
    step, next_step = object(), object()
    first = tree.submodules_at(step, model)
    assert tree.submodules_at(step, model) is first  # a second detector, same step
    model.append(nn.Linear(2, 2))
    later = tree.submodules_at(next_step, model)  # a new step walks again
    assert later == list(model.modules()) and later is not first
    tree.forget()  # the run is over: the user's modules are let go
    assert tree._walks[0] is None and not tree._walks[1]
