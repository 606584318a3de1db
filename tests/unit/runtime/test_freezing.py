"""TD507: a frozen part of the model whose BatchNorm statistics keep changing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402


class Net(nn.Module):
    def __init__(self, norm: bool = True) -> None:
        super().__init__()
        layers = [nn.Linear(6, 12)] + ([nn.BatchNorm1d(12)] if norm else []) + [nn.ReLU()]
        self.backbone = nn.Sequential(*layers)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def fit(
    model: Net, *, eval_backbone: bool = False, toggle: bool = False, steps: int = 24
) -> set[str]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torchdoctor.watch(sample_every=1) as session:
        for step in range(steps):
            model.train()
            if toggle:  # alternate: backbone trained on even steps, frozen on odd ones
                model.backbone.requires_grad_(step % 2 == 0)
            if eval_backbone:
                model.backbone.eval()
            x = torch.randn(16, 6)
            loss = nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report.codes()


def frozen_net(norm: bool = True) -> Net:
    torch.manual_seed(0)
    model = Net(norm)
    model.backbone.requires_grad_(False)
    return model


def test_a_frozen_backbone_in_training_mode_is_found() -> None:
    assert "TD507" in fit(frozen_net())


def test_a_frozen_backbone_kept_in_eval_mode_is_quiet() -> None:
    assert "TD507" not in fit(frozen_net(), eval_backbone=True)


def test_a_frozen_part_without_batchnorm_is_quiet() -> None:
    assert "TD507" not in fit(frozen_net(norm=False))


def test_a_part_frozen_on_some_steps_and_trained_on_others_is_quiet() -> None:
    torch.manual_seed(0)
    assert "TD507" not in fit(Net(), toggle=True)


def test_a_model_with_nothing_frozen_is_quiet() -> None:
    torch.manual_seed(0)
    assert "TD507" not in fit(Net())
