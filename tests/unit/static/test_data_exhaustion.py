"""TD406: a loader rebuilt once its last iterator runs out is one loader per pass of the
data, read whole, not one per step: information like a loader rebuilt once per epoch."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import lint_findings
from torchdoctor.findings import Severity

# glow-pytorch's sample_data: a generator that rebuilds the loader in `except StopIteration`.
STOP_ITERATION_GENERATOR = """
from torch.utils.data import DataLoader

def sample_data(dataset, batch_size):
    loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=4)
    loader = iter(loader)
    while True:
        try:
            yield next(loader)
        except StopIteration:
            loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=4)
            loader = iter(loader)
            yield next(loader)
"""

# A step-counted loop that refills its iterator from a new loader.
STOP_ITERATION_STEPS = """
import torch

def train(model, dataset, steps):
    it = iter(torch.utils.data.DataLoader(dataset, num_workers=2))
    for step in range(steps):
        try:
            batch = next(it)
        except (StopIteration, KeyError):
            loader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=2)
            it = iter(loader)
            batch = next(it)
        model(batch).sum().backward()
"""

# The same with a sentinel: next(it, None) is None once the iterator runs out.
SENTINEL = """
from torch.utils.data import DataLoader

def train(model, dataset, steps):
    it = iter(DataLoader(dataset, num_workers=2))
    for step in range(steps):
        batch = next(it, None)
        if batch is None:
            loader = DataLoader(dataset, shuffle=True, num_workers=2)
            it = iter(loader)
            batch = next(it)
        model(batch).sum().backward()
"""

# An endless generator that loops over a new loader per pass (already a whole pass).
ENDLESS = """
from torch.utils.data import DataLoader

def endless(dataset):
    while True:
        for batch in DataLoader(dataset, shuffle=True, num_workers=2):
            yield batch
"""

# The same handed on whole: `yield from` a new loader, or the name bound to it.
YIELD_FROM = """
from torch.utils.data import DataLoader

def endless(dataset):
    while True:
        yield from DataLoader(dataset, shuffle=True, num_workers=2)

def endless_named(dataset):
    while True:
        loader = DataLoader(dataset, shuffle=True, num_workers=2)
        yield from loader
"""


def test_a_generator_yielding_from_a_new_loader_per_pass_is_information() -> None:
    found = lint_findings(YIELD_FROM, "TD406")
    assert [(f.location.line, f.severity) for f in found] == [
        (6, Severity.INFO),
        (10, Severity.INFO),
    ]


SHAPES = {
    "stop iteration generator": (STOP_ITERATION_GENERATOR, 11),
    "stop iteration in a step loop": (STOP_ITERATION_STEPS, 10),
    "next with a None sentinel": (SENTINEL, 9),
    "endless generator": (ENDLESS, 6),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_loader_rebuilt_once_per_pass_of_the_data_is_information(shape: str) -> None:
    source, line = SHAPES[shape]
    found = lint_findings(source, "TD406")
    assert [(f.location.line, f.severity) for f in found] == [(line, Severity.INFO)]
    assert "persistent_workers=True" in found[0].fix_hint


def test_the_message_says_the_loader_is_rebuilt_when_its_iterator_runs_out() -> None:
    (found,) = lint_findings(STOP_ITERATION_GENERATOR, "TD406")
    assert "each time the iterator read in the loop at line 7 runs out" in found.message
    assert found.evidence["rebuilt"] == "when_exhausted"


def test_a_rebuilt_loader_that_asks_for_persistent_workers_is_still_a_warning() -> None:
    source = STOP_ITERATION_GENERATOR.replace(
        "num_workers=4)\n            loader = iter",
        ("num_workers=4, persistent_workers=True)\n            loader = iter"),
    )
    (found,) = lint_findings(source, "TD406")
    assert found.severity is Severity.WARNING
    assert "runs out" in found.message


@pytest.mark.parametrize(
    "handler",
    [
        "except ValueError:",  # not the end of the iterator
        "except StopIteration:\n            pass\n        finally:",  # rebuilt on every pass
    ],
)
def test_a_loader_rebuilt_outside_an_exhaustion_handler_is_still_a_warning(
    handler: str,
) -> None:
    source = STOP_ITERATION_STEPS.replace("except (StopIteration, KeyError):", handler)
    found = lint_findings(source, "TD406")
    assert [f.severity for f in found] == [Severity.WARNING]


def test_a_handler_that_rebinds_another_iterator_is_still_a_warning() -> None:
    # The new loader feeds `other`, not the iterator whose end the handler catches.
    source = STOP_ITERATION_STEPS.replace("it = iter(loader)\n", "other = iter(loader)\n")
    source = source.replace("batch = next(it)\n        model", "batch = next(other)\n        model")
    found = lint_findings(source, "TD406")
    assert [f.severity for f in found] == [Severity.WARNING]


def test_a_sentinel_test_on_another_value_is_still_a_warning() -> None:
    source = SENTINEL.replace("if batch is None:", "if step % 10 == 0:")
    found = lint_findings(source, "TD406")
    assert [f.severity for f in found] == [Severity.WARNING]
