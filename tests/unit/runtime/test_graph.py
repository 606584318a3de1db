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
