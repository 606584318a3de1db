"""Accumulated micro-batches that each average their own tokens (TD622)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import torchdoctor  # noqa: E402

VOCAB, IGNORED, K, STEPS = 12, -100, 4, 5


def padded(length: int, rows: int = 3) -> tuple[Any, Any]:
    """``rows`` sequences of ``length`` tokens in a batch padded to 40 columns."""
    inputs = torch.randint(0, VOCAB, (rows, 40))
    labels = torch.full((rows, 40), IGNORED)
    labels[:, : length - 1] = inputs[:, 1:length]
    return inputs, labels


def uneven() -> list[tuple[Any, Any]]:
    """A window of micro-batches with very different numbers of counted tokens."""
    return [padded(length) for length in (4, 36, 6, 30)]


def even() -> list[tuple[Any, Any]]:
    return [padded(20) for _ in range(K)]


def model() -> Any:
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(VOCAB, 8), nn.Linear(8, VOCAB))


def train(loss_of: Callable[[Any, Any, Any, int], Any], window: Callable[[], list[Any]]) -> Any:
    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(STEPS):
            batches = window()
            counted = sum(int((labels != IGNORED).sum()) for _, labels in batches)
            for inputs, labels in batches:
                loss_of(net, inputs, labels, counted).backward()
            optimizer.step()
            optimizer.zero_grad()
    return session.report


def mean_over_k(net: Any, inputs: Any, labels: Any, counted: int) -> Any:
    logits = net(inputs).flatten(0, 1)
    return F.cross_entropy(logits, labels.flatten(), ignore_index=IGNORED) / K


def sum_over_window(net: Any, inputs: Any, labels: Any, counted: int) -> Any:
    logits = net(inputs).flatten(0, 1)
    total = F.cross_entropy(logits, labels.flatten(), ignore_index=IGNORED, reduction="sum")
    return total / counted


def test_token_means_of_uneven_micro_batches_are_found() -> None:
    [found] = train(mean_over_k, uneven).by_code("TD622")
    assert found.evidence["accumulation"] == K
    assert found.evidence["median_spread"] >= 5


def test_the_same_mistake_through_a_log_softmax_and_nll_is_found() -> None:
    def nll(net: Any, inputs: Any, labels: Any, counted: int) -> Any:
        log_probs = F.log_softmax(net(inputs), -1).flatten(0, 1)
        return F.nll_loss(log_probs, labels.flatten(), ignore_index=IGNORED) * (1 / K)

    assert "TD622" in train(nll, uneven).codes()


def test_a_sum_normalised_over_the_window_is_quiet() -> None:
    assert "TD622" not in train(sum_over_window, uneven).codes()


def test_micro_batches_with_the_same_token_count_are_quiet() -> None:
    assert "TD622" not in train(mean_over_k, even).codes()


def test_unmasked_targets_with_a_short_last_batch_are_quiet() -> None:
    """Classification: the counts differ only because one batch is smaller."""

    def loss_of(net: Any, inputs: Any, labels: Any, counted: int) -> Any:
        return F.cross_entropy(net(inputs)[:, 0], inputs[:, 1]) / K

    def sizes() -> list[tuple[Any, Any]]:
        return [(torch.randint(0, VOCAB, (rows, 2)), None) for rows in (16, 16, 16, 3)]

    net = model()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        for _ in range(STEPS):
            for inputs, labels in sizes():
                loss_of(net, inputs, labels, 0).backward()
            optimizer.step()
            optimizer.zero_grad()
    assert "TD622" not in session.report.codes()


def test_class_weighted_losses_are_not_judged() -> None:
    weights = torch.rand(VOCAB) + 0.5

    def weighted(net: Any, inputs: Any, labels: Any, counted: int) -> Any:
        logits = net(inputs).flatten(0, 1)
        return F.cross_entropy(logits, labels.flatten(), weight=weights, ignore_index=IGNORED)

    assert "TD622" not in train(weighted, uneven).codes()


def test_one_micro_batch_per_step_is_quiet() -> None:
    assert "TD622" not in train(mean_over_k, lambda: uneven()[:1]).codes()
