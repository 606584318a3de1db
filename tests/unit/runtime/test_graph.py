"""Autograd graphs kept alive across steps (TD205): found precisely, with the holder."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp  # noqa: E402

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def seeded() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = mlp()
    return model, torch.optim.SGD(model.parameters(), lr=0.05)


def loss_of(model: nn.Module) -> torch.Tensor:
    x, y = batch()
    return nn.functional.cross_entropy(model(x), y)


def test_running_total_of_loss_tensors_is_found_with_its_line() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        running_loss = 0.0
        for _ in range(40):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward()
            optimizer.step()
            running_loss += loss  # marker: running-total
    [found] = w.report.by_code("TD205")
    assert found.location.object == "running_loss"
    assert (found.location.path, found.location.line) == (HERE, line_of("marker: running-total"))
    assert "loss.item()" in found.fix_hint


def test_list_of_loss_tensors_is_found() -> None:
    model, optimizer = seeded()
    history = []
    with torchdoctor.watch() as w:
        for _ in range(40):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward()
            optimizer.step()
            history.append(loss)  # marker: history-append
    [found] = w.report.by_code("TD205")
    assert found.location.object == "history"
    assert found.location.line == line_of("marker: history-append")


def test_running_total_reset_every_short_epoch_is_found() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(3):
            epoch_loss = 0.0
            for _ in range(12):
                optimizer.zero_grad()
                loss = loss_of(model)
                loss.backward()
                optimizer.step()
                epoch_loss += loss
    [found] = w.report.by_code("TD205")
    assert found.location.object == "epoch_loss"
    assert found.evidence["live_graphs"] >= 4


class Trainer:
    def __init__(self) -> None:
        self.model, self.optimizer = seeded()
        self.history: list[torch.Tensor] = []

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = loss_of(self.model)
            loss.backward()
            self.optimizer.step()
            self.history.append(loss)  # marker: attribute-append


def test_holder_held_in_an_attribute_is_named() -> None:
    trainer = Trainer()
    with torchdoctor.watch() as w:
        trainer.fit(30)
    [found] = w.report.by_code("TD205")
    assert found.location.object == "self.history"
    assert found.location.line == line_of("marker: attribute-append")
    assert found.evidence["holder"] == "self.history"


def test_holder_out_of_reach_is_not_reported_as_none() -> None:
    model, optimizer = seeded()
    nested: list[list[list[torch.Tensor]]] = [[[]]]  # deeper than the holder search goes
    with torchdoctor.watch() as w:
        for _ in range(30):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward()
            optimizer.step()
            nested[0][0].append(loss)
    [found] = w.report.by_code("TD205")
    assert "holder" not in found.evidence
    assert found.location.object == "loss" and "backward()" in found.message


# -- quiet -----------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["item", "detach", "last-only"])
def test_keeping_values_or_the_last_loss_is_quiet(keep: str) -> None:
    model, optimizer = seeded()
    kept: list[object] = []
    last = None
    with torchdoctor.watch() as w:
        for _ in range(40):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward()
            optimizer.step()
            if keep == "item":
                kept.append(loss.item())
            elif keep == "detach":
                kept.append(loss.detach())
            else:
                last = loss  # overwritten every step: one graph alive at most
    assert last is not None or kept
    assert not w.report.by_code("TD205")


def test_retain_graph_for_a_second_backward_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(30):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward(retain_graph=True)
            (0.1 * loss).backward()
            optimizer.step()
    assert not w.report.by_code("TD205")


def test_gradient_accumulation_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for index in range(80):
            (loss_of(model) / 4).backward()
            if (index + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
    assert not w.report.by_code("TD205")


def test_loss_variables_replaced_every_few_steps_are_quiet() -> None:
    # A WGAN's loss_g lives through the critic's steps until the next generator step:
    # older than a few steps, but only one such graph is ever alive at a time.
    torch.manual_seed(0)
    generator, critic = nn.Linear(4, 2), nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-4)
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(30):
            for _ in range(4):
                with torch.no_grad():
                    fake = generator(torch.randn(16, 4))
                opt_c.zero_grad()
                loss_c = critic(fake).mean() - critic(torch.randn(16, 2) + 1).mean()
                loss_c.backward()
                opt_c.step()
            opt_g.zero_grad()
            loss_g = -critic(generator(torch.randn(16, 4))).mean()
            loss_g.backward()
            opt_g.step()
    assert loss_c is not None and loss_g is not None
    assert not w.report.by_code("TD205")


def test_best_loss_kept_for_many_steps_is_quiet() -> None:
    model, optimizer = seeded()
    best = None
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(40):
            optimizer.zero_grad()
            loss = loss_of(model)
            loss.backward()
            optimizer.step()
            if best is None or loss.item() < best.item():
                best = loss  # one graph, kept until the next improvement
    assert best is not None
    assert not w.report.by_code("TD205")
