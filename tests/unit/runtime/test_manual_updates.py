"""Training without an optimizer is watched, and a run that trains nothing says so."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from torchdoctor.report.options import RenderOptions  # noqa: E402
from torchdoctor.report.text import render_text  # noqa: E402
from torchdoctor.runtime.facts import watched_text  # noqa: E402


def manual_sgd(update: str, steps: int = 40) -> torchdoctor.Report:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    with torchdoctor.watch() as session:
        for _ in range(steps):
            x = torch.randn(32, 8)
            loss = nn.functional.mse_loss(model(x), x[:, :1] * 2)
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                if update == "data":
                    p.data.add_(p.grad, alpha=-0.05)
                elif update == "no_grad":
                    with torch.no_grad():
                        p -= 0.05 * p.grad
                # "none": gradients computed, parameters never changed
    return session.report


@pytest.mark.parametrize("update", ["data", "no_grad"])
def test_parameters_updated_by_hand_are_seen(update: str) -> None:
    report = manual_sgd(update)
    assert report.facts["manual_updates"] >= 3
    assert "updated by hand" in report.facts["watched"]


def test_backward_without_any_update_is_not_called_a_manual_update() -> None:
    report = manual_sgd("none")
    assert "manual_updates" not in report.facts
    assert "only the loss and the gradients were checked" in report.facts["watched"]


def test_an_optimizer_loop_is_not_called_a_manual_update() -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(40):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert "manual_updates" not in session.report.facts
    assert session.report.facts["watched"] == "40 backward passes and 40 optimizer steps watched"


def test_a_run_that_trains_nothing_says_so_instead_of_no_problems() -> None:
    model = nn.Linear(4, 2)
    with torchdoctor.watch() as session, torch.no_grad():
        model(torch.randn(3, 4))
    text = render_text(session.report, RenderOptions(width=200))
    assert "nothing was trained while watched" in text


def test_watched_text_counts() -> None:
    assert watched_text(1, 1, 0) == "1 backward pass and 1 optimizer step watched"
    assert watched_text(0, 0, 0).startswith("nothing was trained")
