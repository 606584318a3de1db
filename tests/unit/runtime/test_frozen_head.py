"""TD226 at run time: the layer whose output the loss takes is frozen at its random
initialisation while other parameters train, whatever loss family or arrangement; quiet
on heads that train, heads trained or loaded before freezing, and frozen layers that do
not compute the loss's input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def classify(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out, y)


def regress(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(out, F.one_hot(y, out.shape[1]).float())


def tag(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.BCELoss()(torch.sigmoid(out), F.one_hot(y, out.shape[1]).float())


def by_hand(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (out - F.one_hot(y, out.shape[1]).float()).pow(2).sum(1).mean()


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU())
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(64, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x)).view(x.shape[0], -1)


def only_norms_train(model: nn.Module) -> None:
    for name, param in model.named_parameters():
        param.requires_grad = isinstance(
            dict(model.named_modules())[name.rpartition(".")[0]], nn.BatchNorm1d
        )


def train(prepare: Callable[[Net], None], loss_fn: Loss = classify, steps: int = 6) -> set[str]:
    torch.manual_seed(0)
    with torchdoctor.watch() as session:
        model = Net()
        prepare(model)
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        for _ in range(steps):
            x, y = torch.randn(8, 16), torch.randint(0, 5, (8,))
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    return session.report.codes()


@pytest.mark.parametrize("loss_fn", [classify, regress, tag], ids=["ce", "mse", "bce"])
def test_fresh_head_frozen_with_only_norms_training_is_flagged(loss_fn: Loss) -> None:
    assert "TD226" in train(only_norms_train, loss_fn)


def test_head_frozen_by_its_module_is_flagged() -> None:
    assert "TD226" in train(lambda m: m.head.requires_grad_(False))


def test_a_second_phase_is_judged_too() -> None:
    torch.manual_seed(0)
    with torchdoctor.watch() as session:
        for phase in range(2):
            model = Net()
            if phase:
                model.head.requires_grad_(False)
            optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
            for _ in range(30):
                optimizer.zero_grad()
                classify(model(torch.randn(8, 16)), torch.randint(0, 5, (8,))).backward()
                optimizer.step()
    assert "TD226" in session.report.codes()


def test_head_that_trains_is_quiet() -> None:
    assert "TD226" not in train(lambda m: m.body.requires_grad_(False))


def pretrained_head_frozen(model: Net) -> None:
    with torch.no_grad():
        model.head[1].weight.normal_(0, 0.5)  # trained or loaded: no longer a default draw
    model.head.requires_grad_(False)


def test_head_trained_before_freezing_is_quiet() -> None:
    assert "TD226" not in train(pretrained_head_frozen)


def test_frozen_random_layer_before_a_trained_head_is_quiet() -> None:
    """Random features on purpose: a frozen projection that the trained head reads."""
    assert "TD226" not in train(lambda m: m.body[0].requires_grad_(False))


def test_loss_written_by_hand_is_not_traced() -> None:
    assert "TD226" not in train(lambda m: m.head.requires_grad_(False), by_hand)


def test_hook_is_gone_after_the_first_steps() -> None:
    from torch.nn.modules import module

    before = len(module._global_forward_hooks)
    with torchdoctor.watch():
        model, optimizer = Net(), None
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(25):
            optimizer.zero_grad()
            classify(model(torch.randn(8, 16)), torch.randint(0, 5, (8,))).backward()
            optimizer.step()
        during = len(module._global_forward_hooks)
    assert during == before  # judged and removed while the run goes on
    assert len(module._global_forward_hooks) == before
