"""The out-of-memory explanation says what the live model and optimizer hold (TD709)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from torchdoctor.runtime.exceptions import explain_exception  # noqa: E402
from torchdoctor.runtime.exceptions.memory import spent_on  # noqa: E402

pytestmark = pytest.mark.needs_torch

OOM = "DefaultCPUAllocator: not enough memory: you tried to allocate 4000000000 bytes."


def _trained() -> tuple[nn.Module, torch.optim.Optimizer]:
    model = nn.Sequential(nn.Linear(100, 50), nn.BatchNorm1d(50), nn.Linear(50, 10))
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 100)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_parameters_gradients_and_optimizer_state_are_counted_once_each() -> None:
    model, optimizer = _trained()
    params = sum(p.numel() * 4 for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    steps = 4 * len(list(model.parameters()))  # one float32 step counter per parameter
    spent = spent_on([model], [optimizer], "cpu")
    assert spent == {
        "parameters": params + buffers,
        "gradients": params,
        "optimizer_state": 2 * params + steps,
    }


def test_the_oom_finding_carries_the_breakdown() -> None:
    model, optimizer = _trained()
    found = explain_exception(RuntimeError(OOM), models=[model], optimizers=[optimizer])
    assert found is not None and found.code == "TD709"
    assert found.evidence["memory_breakdown"]["gradients"] == sum(
        p.numel() * 4 for p in model.parameters()
    )
    assert "the model and optimizer hold parameters" in found.message


def test_without_models_the_explanation_is_unchanged() -> None:
    found = explain_exception(RuntimeError(OOM))
    assert found is not None and found.code == "TD709"
    assert "memory_breakdown" not in found.evidence and "hold parameters" not in found.message
    assert spent_on([], [], "cpu") == {}


def test_tensors_on_another_device_are_not_counted() -> None:
    model, optimizer = _trained()
    assert spent_on([model], [optimizer], "cuda") == {} or torch.cuda.is_available()
