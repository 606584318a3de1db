"""Gradient accumulation that sums micro-batch means (TD618 at run time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp  # noqa: E402

K = 4
STEPS = 5


def watched(body: Callable[[], None]) -> torchdoctor.Report:
    torch.manual_seed(0)
    with torchdoctor.watch() as session:
        body()
    return session.report


def accumulate_in_loop(loss_of: Callable[[Any, Any, Any], Any], k: int = K) -> Callable[[], None]:
    def body() -> None:
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for i in range(k * STEPS):
            loss_of(model, *batch()).backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()

    return body


def mean_ce(model: Any, x: Any, y: Any) -> Any:
    return F.cross_entropy(model(x), y)


class Trainer:
    """The step split into methods; the loop calls ``micro_step`` once per batch."""

    def __init__(self, scale: bool) -> None:
        self.model = mlp()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.scale, self.calls = scale, 0

    def _loss(self, x: Any, y: Any) -> Any:
        loss = F.mse_loss(self.model(x)[:, 0], y.float())
        return loss / K if self.scale else loss

    def _backward(self, loss: Any) -> None:
        loss.backward()

    def micro_step(self, x: Any, y: Any) -> None:
        self._backward(self._loss(x, y))
        self.calls += 1
        if self.calls % K == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def fit(self) -> None:
        for _ in range(K * STEPS):
            self.micro_step(*batch())


def with_callbacks(scale: bool, enabled: bool = True) -> Callable[[], None]:
    """Callbacks of a small engine; the loss goes through a GradScaler (a disabled one
    hands the loss back unchanged, as on a machine without float16)."""

    def body() -> None:
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        scaler = torch.amp.GradScaler("cpu", enabled=enabled)
        seen = [0]

        def on_batch(x: Any, y: Any) -> None:
            loss = F.cross_entropy(model(x), y)
            scaler.scale(loss / K if scale else loss).backward()

        def on_batch_end() -> None:
            seen[0] += 1
            if seen[0] % K == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()

        for _ in range(K * STEPS):
            on_batch(*batch())
            on_batch_end()

    return body


def test_unscaled_mean_losses_accumulated_in_a_loop_are_found() -> None:
    [found] = watched(accumulate_in_loop(mean_ce)).by_code("TD618")
    assert found.evidence["accumulation"] == K
    assert found.evidence["loss"] == "nll_loss"


def test_unscaled_losses_accumulated_through_trainer_helpers_are_found() -> None:
    [found] = watched(Trainer(scale=False).fit).by_code("TD618")
    assert found.evidence["loss"] == "mse_loss"


@pytest.mark.parametrize("enabled", [True, False])
def test_unscaled_losses_accumulated_in_callbacks_through_a_grad_scaler_are_found(
    enabled: bool,
) -> None:
    assert "TD618" in watched(with_callbacks(scale=False, enabled=enabled)).codes()


def test_a_divided_loss_handed_back_by_a_disabled_grad_scaler_is_quiet() -> None:
    """nanoGPT's shape: ``loss / k`` then ``scaler.scale(loss).backward()`` with the scaler
    switched off: the top node is the division, not a loss-scale multiplication."""
    assert "TD618" not in watched(with_callbacks(scale=True, enabled=False)).codes()


def test_a_sum_of_two_mean_losses_is_found() -> None:
    def two(model: Any, x: Any, y: Any) -> Any:
        out = model(x)
        return F.cross_entropy(out, y) + out.pow(2).mean()

    assert "TD618" in watched(accumulate_in_loop(two)).codes()


def test_losses_divided_by_the_accumulation_count_are_quiet() -> None:
    assert "TD618" not in watched(accumulate_in_loop(lambda m, x, y: mean_ce(m, x, y) / K)).codes()
    assert "TD618" not in watched(Trainer(scale=True).fit).codes()
    assert "TD618" not in watched(with_callbacks(scale=True)).codes()


def test_sum_reduced_losses_normalised_by_a_token_count_are_quiet() -> None:
    def per_token(model: Any, x: Any, y: Any) -> Any:
        y = y.masked_fill(x[:, 2] > 1, -100)  # some targets ignored, a varying count
        total = F.cross_entropy(model(x), y, ignore_index=-100, reduction="sum")
        return total / (y != -100).sum().clamp(min=1)

    assert "TD618" not in watched(accumulate_in_loop(per_token)).codes()


def test_a_sum_reduced_loss_on_purpose_is_quiet() -> None:
    def summed(model: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(model(x), y, reduction="sum")

    assert "TD618" not in watched(accumulate_in_loop(summed)).codes()


def test_one_backward_per_step_is_quiet() -> None:
    assert "TD618" not in watched(accumulate_in_loop(mean_ce, k=1)).codes()


def test_two_losses_through_one_helper_called_from_two_lines_are_quiet() -> None:
    """A discriminator's real and fake halves: one step, two backward passes, one helper."""

    def body() -> None:
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

        def backward(loss: Any) -> None:
            loss.backward()

        for _ in range(STEPS * 2):
            optimizer.zero_grad()
            x, y = batch()
            backward(F.cross_entropy(model(x), y))
            backward(F.cross_entropy(model(-x), y))
            optimizer.step()

    assert "TD618" not in watched(body).codes()


def test_several_losses_of_one_forward_with_retain_graph_are_quiet() -> None:
    def body() -> None:
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for _ in range(STEPS * 2):
            optimizer.zero_grad()
            x, y = batch()
            out = model(x)
            losses = [F.cross_entropy(out, y), out.pow(2).mean(), out.abs().mean()]
            for index, loss in enumerate(losses):
                loss.backward(retain_graph=index < len(losses) - 1)
            optimizer.step()

    assert "TD618" not in watched(body).codes()


def test_one_pass_per_task_head_is_quiet() -> None:
    """A multi-task step: each task's loss goes through its own head, one backward each."""

    def body() -> None:
        trunk = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        heads = nn.ModuleList(nn.Linear(16, 3) for _ in range(3))
        model = nn.ModuleDict({"trunk": trunk, "heads": heads})
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for _ in range(STEPS * 2):
            optimizer.zero_grad()
            for head in heads:
                x, y = batch()
                F.cross_entropy(head(trunk(x)), y).backward()
            optimizer.step()

    assert "TD618" not in watched(body).codes()


def test_backward_passes_inside_a_closure_of_lbfgs_are_quiet() -> None:
    def body() -> None:
        model = mlp()
        optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
        x, y = batch()

        def closure() -> Any:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            return loss

        for _ in range(STEPS):
            optimizer.step(closure)

    assert "TD618" not in watched(body).codes()


def test_an_irregular_number_of_passes_per_step_is_quiet() -> None:
    def body() -> None:
        model = mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        for count in (2, 3, 5, 2, 4, 3, 1, 6):
            for _ in range(count):
                mean_ce(model, *batch()).backward()
            optimizer.step()
            optimizer.zero_grad()

    assert "TD618" not in watched(body).codes()
