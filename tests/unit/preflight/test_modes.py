"""Train/eval mode: a non-deterministic eval forward (TD504) and BatchNorm fed one example
in training mode (TD503)."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _batch(size: int = 16) -> tuple:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(size, 6, generator=generator), torch.arange(size) % 3


def _run(model, data, code):
    return check(model, data, nn.CrossEntropyLoss(), select=[code]).by_code(code)


class FunctionalDropout(nn.Module):
    def __init__(self, mode_aware: bool) -> None:
        super().__init__()
        self.hidden, self.out, self.mode_aware = nn.Linear(6, 16), nn.Linear(16, 3), mode_aware

    def forward(self, x):
        h = F.relu(self.hidden(x))
        if self.mode_aware:  # noqa: SIM108 - the test finds the else line by its text
            h = F.dropout(h, 0.5, training=self.training)
        else:
            h = F.dropout(h, 0.5)
        return self.out(h)


class AlwaysTraining(nn.Module):
    """A model whose train() override keeps its dropout on."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.5), nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)

    def train(self, mode: bool = True):
        super().train(mode)
        self.body[1].train(True)
        return self


class Noise(nn.Module):
    def __init__(self, source: str) -> None:
        super().__init__()
        self.layer, self.source = nn.Linear(6, 3), source

    def forward(self, x):
        if self.source == "torch":
            x = x + 0.1 * torch.randn_like(x)
        elif self.source == "numpy":
            x = x + float(np.random.rand())
        elif self.source == "training-only" and self.training:
            x = x + 0.1 * torch.randn_like(x)
        return self.layer(x)


def _line_of(text: str, owner) -> int:
    lines, start = inspect.getsourcelines(owner)
    return start + next(i for i, line in enumerate(lines) if text in line)


# --- TD504 -----------------------------------------------------------------------------------


def test_functional_dropout_without_the_mode_is_named_at_its_line() -> None:
    torch.manual_seed(0)
    [found] = _run(FunctionalDropout(mode_aware=False), _batch(), "TD504")
    assert found.severity is Severity.ERROR
    assert "F.dropout(p=0.5, training=True)" in found.message
    assert found.location.path == __file__
    assert found.location.line == _line_of("h = F.dropout(h, 0.5)\n", FunctionalDropout.forward)
    assert "training=self.training" in found.fix_hint


def test_a_dropout_module_kept_in_training_mode_is_named() -> None:
    torch.manual_seed(0)
    [found] = _run(AlwaysTraining(), _batch(), "TD504")
    assert found.location.object == "body.1"
    assert "still in training mode after `model.eval()`" in found.message
    assert "override of `train()`" in found.fix_hint


def test_noise_drawn_in_eval_mode_is_a_warning() -> None:
    torch.manual_seed(0)
    [found] = _run(Noise("torch"), _batch(), "TD504")
    assert found.severity is Severity.WARNING
    assert "torch.randn_like" in found.message


def test_numpy_randomness_is_reported_for_the_model() -> None:
    torch.manual_seed(0)
    [found] = _run(Noise("numpy"), _batch(), "TD504")
    assert found.location.object == "Noise"
    assert "no PyTorch random op ran" in found.message


@pytest.mark.parametrize(
    "make",
    [
        lambda: FunctionalDropout(mode_aware=True),
        lambda: Noise("training-only"),
        lambda: nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.5), nn.Linear(16, 3)),
        lambda: nn.Sequential(
            nn.Linear(6, 16), nn.BatchNorm1d(16), nn.AlphaDropout(0.2), nn.RReLU(), nn.Linear(16, 3)
        ),
    ],
    ids=[
        "mode-aware-functional",
        "training-only-noise",
        "dropout-module",
        "batchnorm-alphadropout-rrelu",
    ],
)
def test_models_that_follow_eval_mode_are_quiet(make) -> None:
    torch.manual_seed(0)
    assert _run(make(), _batch(), "TD504") == []


def test_a_model_returning_integer_predictions_is_compared_exactly() -> None:
    class Predict(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(6, 3)

        def forward(self, x):
            return self.layer(x), self.layer(x).argmax(dim=1)

    torch.manual_seed(0)

    def loss_fn(output, target):
        return F.cross_entropy(output[0], target)

    report = check(Predict(), _batch(), loss_fn, select=["TD504"])
    assert report.by_code("TD504") == []


# --- TD503 -----------------------------------------------------------------------------------


def _bn1d() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _loader(samples: int, batch_size: int = 8, **options) -> DataLoader:
    inputs, targets = _batch(samples)
    return DataLoader(TensorDataset(inputs, targets), batch_size=batch_size, **options)


def test_a_batch_of_one_through_batchnorm1d_is_explained_instead_of_crashing() -> None:
    model = _bn1d()
    report = check(
        model, _batch(1), nn.CrossEntropyLoss(), torch.optim.SGD(model.parameters(), lr=0.1)
    )
    [found] = report.by_code("TD503")
    assert found.location.object == "1"
    assert "raised `ValueError: Expected more than 1 value per channel" in found.message
    assert report.exit_code() == 1


def test_a_batch_of_one_through_batchnorm2d_is_reported_though_it_runs() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(64, 3))
    [found] = _run(model, (torch.randn(1, 1, 6, 6), torch.tensor([2])), "TD503")
    assert "with its own statistics" in found.message
    assert found.evidence["raised"] is False


def test_a_loader_whose_last_batch_holds_one_example_is_reported() -> None:
    [found] = _run(_bn1d(), _loader(17, shuffle=True), "TD503")
    assert found.location.object == "DataLoader"
    assert found.evidence == {"samples": 17, "batch_size": 8, "module": "1", "input_shape": [8, 8]}
    assert "drop_last=True" in found.fix_hint


@pytest.mark.parametrize(
    "loader",
    [
        lambda: _loader(17, drop_last=True),
        lambda: _loader(18),
        lambda: _loader(16),
    ],
    ids=["drop-last", "last-batch-of-two", "no-partial-batch"],
)
def test_loaders_without_a_single_example_batch_are_quiet(loader) -> None:
    assert _run(_bn1d(), loader(), "TD503") == []


def test_batchnorm_over_flattened_positions_does_not_see_the_last_batch_as_one() -> None:
    class PerPosition(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.head = nn.BatchNorm1d(6), nn.Linear(6 * 5, 3)

        def forward(self, x):  # x: [N, 5, 6] -> BatchNorm over N * 5 rows
            return self.head(self.norm(x.reshape(-1, 6)).reshape(x.shape[0], -1))

    torch.manual_seed(0)
    inputs = torch.randn(17, 5, 6)
    loader = DataLoader(TensorDataset(inputs, torch.arange(17) % 3), batch_size=8)
    assert _run(PerPosition(), loader, "TD503") == []


def test_frozen_batchnorm_and_batch_independent_norms_are_quiet() -> None:
    class FrozenNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))

        def forward(self, x):
            return self.body(x)

        def train(self, mode: bool = True):
            super().train(mode)
            self.body[1].eval()  # fine-tuning with frozen statistics
            return self

    torch.manual_seed(0)
    assert _run(FrozenNorm(), _batch(1), "TD503") == []
    norms = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Linear(8, 3))
    assert _run(norms, _loader(17), "TD503") == []
