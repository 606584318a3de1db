"""Small builders shared by the probe tests: tiny models, batches, a one-code check."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import torchdoctor
from torchdoctor.findings import Report


def run(model: Any, data: Any, loss_fn: Any, *codes: str, **options: Any) -> Report:
    """``check`` restricted to ``codes`` (so only their probes run)."""
    return torchdoctor.check(model, data, loss_fn, select=list(codes), **options)


def classifier(features: int = 8, classes: int = 4, hidden: int = 16) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def class_batch(
    size: int = 32, features: int = 8, classes: int = 4
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return (
        torch.randn(size, features, generator=generator),
        torch.randint(0, classes, (size,), generator=generator),
    )


def messages(report: Report, code: str) -> str:
    return "\n".join(f"{f.location}: {f.message}" for f in report.by_code(code))
