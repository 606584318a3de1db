"""DDP's unused-parameter error names the parameters (TD208's detail)."""

from __future__ import annotations

import re

import pytest

from torchdoctor.runtime.exceptions.ddp import unused_parameters
from torchdoctor.runtime.exceptions.facts import ErrorFacts

torch = pytest.importorskip("torch")
nn = torch.nn

MESSAGE = (
    "Expected to have finished reduction in the prior iteration before starting a new one. "
    "This error indicates that your module has parameters that were not used in producing "
    "loss.\nParameter indices which did not receive grad for rank 1: 2 3\n In addition, "
    "you can set the environment variable TORCH_DISTRIBUTED_DEBUG"
)


def _facts(text: str, models: tuple[object, ...]) -> ErrorFacts:
    return ErrorFacts(
        "RuntimeError", text, re.search("Expected", text) or re.search("", text), models=models
    )


def _two_layers() -> object:
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1))
    model[0].requires_grad_(False)  # frozen: DDP does not count it
    return model


def test_indices_become_the_model_parameter_names() -> None:
    detail = unused_parameters(_facts(MESSAGE, (_two_layers(),)))
    assert detail is not None
    assert "`2.weight`, `2.bias`" in detail.summary and "rank 1" in detail.summary
    assert detail.evidence["parameters"] == ["2.weight", "2.bias"]
    assert "`2.weight`" in detail.fixes[0]


def test_without_a_fitting_model_the_indices_are_said() -> None:
    detail = unused_parameters(_facts(MESSAGE, (nn.Linear(2, 2),)))
    assert detail is not None
    assert "indices 2 3" in detail.summary
    assert detail.evidence["parameters"] == []


def test_a_message_without_indices_keeps_the_general_explanation() -> None:
    text = "Expected to have finished reduction in the prior iteration before starting a new one."
    assert unused_parameters(_facts(text, (_two_layers(),))) is None
