"""TD507 (values): parameters meant frozen that an optimizer step still changes, and
freezing that only an overridden ``train()`` applies, never called.

Each bug is written in three shapes: a plain loop, a trainer class whose steps live in
helpers, and a callback that freezes from outside the loop.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

import torchdoctor  # noqa: E402


def data() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(32, 8)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Sequential(nn.Linear(8, 16), nn.ReLU()), nn.Linear(16, 3))


def freeze(module: nn.Module, *, drop_grads: bool) -> None:
    for p in module.parameters():
        p.requires_grad = False
        if drop_grads:
            p.grad = None


# -- a freeze applied mid-training, with stale gradients ----------------------------------


def plain_loop(drop_grads: bool, set_to_none: bool = False) -> set[str]:
    model = net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.05)
    with torchdoctor.watch(sample_every=1) as session:
        for step in range(30):
            optimizer.zero_grad(set_to_none=set_to_none)
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            if step == 10:
                freeze(model[0], drop_grads=drop_grads)
            optimizer.step()
    return session.report.codes()


class Trainer:
    def __init__(self, drop_grads: bool) -> None:
        self.model = net()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.drop_grads = drop_grads

    def _loss(self) -> torch.Tensor:
        x, y = data()
        return F.cross_entropy(self.model(x), y)

    def _update(self) -> None:
        self.optimizer.zero_grad(set_to_none=False)
        self._loss().backward()
        self.optimizer.step()

    def fit(self, epochs: int) -> None:
        for epoch in range(epochs):
            if epoch == 1:
                freeze(self.model[0], drop_grads=self.drop_grads)
            for _ in range(8):
                self._update()


def trainer_class(drop_grads: bool) -> set[str]:
    with torchdoctor.watch(sample_every=1) as session:
        Trainer(drop_grads).fit(4)
    return session.report.codes()


def with_callback(drop_grads: bool) -> set[str]:
    model = net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    callbacks: list[Callable[[int], None]] = [
        lambda step: freeze(model[0], drop_grads=drop_grads) if step == 6 else None
    ]
    with torchdoctor.watch(sample_every=1) as session:
        for step in range(24):
            optimizer.zero_grad(set_to_none=False)
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            for callback in callbacks:
                callback(step)
            optimizer.step()
    return session.report.codes()


@pytest.mark.parametrize("shape", [plain_loop, trainer_class, with_callback])
def test_a_frozen_parameter_with_a_stale_gradient_that_still_moves_is_found(
    shape: Callable[[bool], set[str]],
) -> None:
    assert "TD507" in shape(False)


@pytest.mark.parametrize("shape", [plain_loop, trainer_class, with_callback])
def test_a_freeze_that_drops_the_gradient_is_quiet(shape: Callable[[bool], set[str]]) -> None:
    assert "TD507" not in shape(True)


def test_gradients_set_to_none_each_step_are_quiet() -> None:
    assert "TD507" not in plain_loop(drop_grads=False, set_to_none=True)


def test_a_hand_set_gradient_on_a_never_trained_tensor_is_quiet() -> None:
    """Evolution strategies: a frozen tensor updated from a gradient estimate on purpose."""
    weights = nn.Parameter(torch.zeros(8), requires_grad=False)
    optimizer = torch.optim.SGD([weights], lr=0.1)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(12):
            noise = torch.randn(8)
            weights.grad = -noise * float((noise * torch.ones(8)).sum())
            optimizer.step()
    assert "TD507" not in session.report.codes()


def test_a_gan_style_toggle_with_separate_optimizers_is_quiet() -> None:
    generator, critic = net(), nn.Linear(3, 1)
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
    with torchdoctor.watch(sample_every=1) as session:
        for _ in range(12):
            critic.requires_grad_(True)
            opt_c.zero_grad(set_to_none=False)
            critic(generator(data()[0]).detach()).mean().backward()
            opt_c.step()
            critic.requires_grad_(False)
            opt_g.zero_grad(set_to_none=False)
            (-critic(generator(data()[0])).mean()).backward()
            opt_g.step()
    assert "TD507" not in session.report.codes()


# -- freezing that only an overridden train() applies -------------------------------------


class Backbone(nn.Module):
    def __init__(self, frozen_stages: int = 1) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU()) for _ in range(2)
        )
        self.frozen_stages = frozen_stages

    def _freeze_stages(self) -> None:
        for stage in list(self.stages)[: self.frozen_stages]:
            stage.eval()
            for p in stage.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> Backbone:
        super().train(mode)
        self._freeze_stages()
        print("freezing", self.frozen_stages, "stages")  # must not show from the shadow
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages:
            x = stage(x)
        return x


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = Backbone()
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def train_plain(call_train: bool) -> set[str]:
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with torchdoctor.watch() as session:
        if call_train:
            model.train()
        for _ in range(10):
            optimizer.zero_grad()
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
    return session.report.codes()


class Runner:
    def __init__(self, call_train: bool) -> None:
        self.model = Classifier()
        self.optimizer = self._build_optimizer()
        self.call_train = call_train

    def _build_optimizer(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.model.parameters(), lr=1e-2)

    def _before_epoch(self) -> None:
        if self.call_train:
            self.model.train()

    def _step(self) -> None:
        self.optimizer.zero_grad()
        x, y = data()
        F.cross_entropy(self.model(x), y).backward()
        self.optimizer.step()

    def run(self) -> None:
        for _ in range(2):
            self._before_epoch()
            for _ in range(5):
                self._step()


def train_runner(call_train: bool) -> set[str]:
    with torchdoctor.watch() as session:
        Runner(call_train).run()
    return session.report.codes()


def train_hooks(call_train: bool) -> set[str]:
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    hooks: dict[str, list[Callable[[], None]]] = {"epoch_start": [], "batch": []}
    if call_train:
        hooks["epoch_start"].append(model.train)

    def train_batch() -> None:
        optimizer.zero_grad()
        x, y = data()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    hooks["batch"].append(train_batch)
    with torchdoctor.watch() as session:
        for _ in range(2):
            for hook in hooks["epoch_start"]:
                hook()
            for _ in range(5):
                for hook in hooks["batch"]:
                    hook()
    return session.report.codes()


@pytest.mark.parametrize("shape", [train_plain, train_runner, train_hooks])
def test_freezing_only_inside_an_uncalled_train_is_found(
    shape: Callable[[bool], set[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert "TD507" in shape(False)
    assert "freezing" not in capsys.readouterr().out  # the shadow's train() stayed silent


@pytest.mark.parametrize("shape", [train_plain, train_runner, train_hooks])
def test_freezing_applied_by_calling_train_is_quiet(shape: Callable[[bool], set[str]]) -> None:
    assert "TD507" not in shape(True)


def test_gradual_unfreezing_after_train_is_quiet() -> None:
    model = Classifier()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torchdoctor.watch() as session:
        for step in range(10):
            if step == 3:  # unfreeze on purpose, after the first steps
                model.backbone.stages[0].requires_grad_(True)
            optimizer.zero_grad()
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
    assert "TD507" not in session.report.codes()


def test_the_model_and_its_flags_are_left_as_they_were() -> None:
    model = Classifier()
    flags = [p.requires_grad for p in model.parameters()]
    modes = [m.training for m in model.modules()]
    train_plain_with(model)
    assert [p.requires_grad for p in model.parameters()] == flags
    assert [m.training for m in model.modules()] == modes


def train_plain_with(model: nn.Module) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    with torchdoctor.watch():
        for _ in range(3):
            optimizer.zero_grad()
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
