"""Loss domains at run time (TD301, TD303, TD305, TD309), in three arrangements each."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from tests.unit.runtime.shapes import SHAPES, train  # noqa: E402

CLASSES = 5


def classifier() -> Any:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, CLASSES))


def classes() -> tuple[Any, Any]:
    return torch.randn(32, 8), torch.randint(0, CLASSES, (32,))


def binary() -> tuple[Any, Any]:
    x = torch.randn(32, 8)
    return x, (x[:, 0] > 0).float()


def run(shape: str, loss_of: Any, batch: Any = classes, outputs: int = CLASSES) -> set[str]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, outputs))
    return train(shape, model, loss_of, batch).codes()


# -- TD305: nll_loss on what is not log-probabilities ----------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_nll_on_softmax_probabilities_is_found(shape: str) -> None:
    assert "TD305" in run(shape, lambda m, x, y: F.nll_loss(m(x).softmax(1), y))


@pytest.mark.parametrize("shape", SHAPES)
def test_nll_on_raw_scores_is_found(shape: str) -> None:
    assert "TD305" in run(shape, lambda m, x, y: nn.NLLLoss()(m(x), y))


@pytest.mark.parametrize("shape", SHAPES)
def test_nll_on_log_softmax_is_quiet(shape: str) -> None:
    assert "TD305" not in run(shape, lambda m, x, y: F.nll_loss(m(x).log_softmax(1), y))


@pytest.mark.parametrize("shape", SHAPES)
def test_nll_on_log_softmax_over_the_batch_is_found(shape: str) -> None:
    model = classifier()
    report = train(
        shape, model, lambda m, x, y: nn.NLLLoss()(nn.LogSoftmax(dim=0)(m(x)), y), classes
    )
    [found] = report.by_code("TD305")
    assert found.evidence == {"log_softmax_dim": 0, "input_dims": 2}


@pytest.mark.parametrize("dim", [1, -1])
def test_nll_on_log_softmax_over_the_classes_is_quiet(dim: int) -> None:
    assert "TD305" not in run("loop", lambda m, x, y: F.nll_loss(m(x).log_softmax(dim), y))


def test_sequence_log_probabilities_flattened_before_nll_are_quiet() -> None:
    def per_token(m: Any, x: Any, y: Any) -> Any:  # (batch, time, classes) -> (batch*time, classes)
        scores = m(x).reshape(8, 4, CLASSES).log_softmax(-1)
        return F.nll_loss(scores.reshape(-1, CLASSES), y)

    assert "TD305" not in run("loop", per_token)


def test_nll_on_masked_log_probabilities_is_quiet() -> None:
    def masked(m: Any, x: Any, y: Any) -> Any:
        scores = m(x).masked_fill(torch.arange(CLASSES) == CLASSES - 1, float("-inf"))
        return F.nll_loss(scores.log_softmax(1), y.clamp(max=CLASSES - 2))

    assert "TD305" not in run("loop", masked)


def test_cross_entropy_on_logits_is_quiet() -> None:
    codes = run("loop", lambda m, x, y: F.cross_entropy(m(x), y, label_smoothing=0.1))
    assert not codes & {"TD301", "TD305", "TD309"}


# -- TD301: a softmax output fed to cross_entropy --------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_softmax_before_cross_entropy_is_found(shape: str) -> None:
    assert "TD301" in run(shape, lambda m, x, y: nn.CrossEntropyLoss()(m(x).softmax(-1), y))


@pytest.mark.parametrize("shape", SHAPES)
def test_cross_entropy_on_scores_is_quiet(shape: str) -> None:
    assert "TD301" not in run(shape, lambda m, x, y: nn.CrossEntropyLoss()(m(x), y))


def test_softmax_attention_inside_the_model_is_quiet() -> None:
    def attended(m: Any, x: Any, y: Any) -> Any:
        weights = x.softmax(1)  # a softmax in the forward, not the loss input
        return F.cross_entropy(m(weights * x), y)

    assert "TD301" not in run("loop", attended)


# -- TD303: probabilities fed to BCE with logits ---------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_sigmoid_before_bce_with_logits_is_found(shape: str) -> None:
    loss = nn.BCEWithLogitsLoss()
    codes = run(shape, lambda m, x, y: loss(m(x).sigmoid().squeeze(1), y), binary, 1)
    assert "TD303" in codes


@pytest.mark.parametrize("shape", SHAPES)
def test_bce_with_logits_on_logits_is_quiet(shape: str) -> None:
    loss = nn.BCEWithLogitsLoss()
    assert "TD303" not in run(shape, lambda m, x, y: loss(m(x).squeeze(1), y), binary, 1)


# -- TD309: targets and weights outside the domain -------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_minus_one_one_targets_are_found(shape: str) -> None:
    loss = nn.BCEWithLogitsLoss()
    codes = run(shape, lambda m, x, y: loss(m(x).squeeze(1), y * 2 - 1), binary, 1)
    assert "TD309" in codes


@pytest.mark.parametrize("shape", SHAPES)
def test_negative_class_weights_are_found(shape: str) -> None:
    weights = torch.tensor([1.0, 1.0, -0.5, 1.0, 1.0])
    assert "TD309" in run(shape, lambda m, x, y: F.cross_entropy(m(x), y, weight=weights))


@pytest.mark.parametrize("shape", SHAPES)
def test_smoothed_targets_and_positive_weights_are_quiet(shape: str) -> None:
    loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
    codes = run(shape, lambda m, x, y: loss(m(x).squeeze(1), y * 0.9 + 0.05), binary, 1)
    assert "TD309" not in codes


def test_a_class_weighted_zero_is_quiet() -> None:
    weights = torch.tensor([1.0, 0.0, 2.0, 1.0, 1.0])
    assert "TD309" not in run("loop", lambda m, x, y: F.cross_entropy(m(x), y, weight=weights))


def test_negative_pos_weight_is_found() -> None:
    loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([-0.4]))
    assert "TD309" in run("loop", lambda m, x, y: loss(m(x).squeeze(1), y), binary, 1)


def test_a_zero_initialised_head_with_bce_with_logits_is_quiet() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    nn.init.zeros_(model[2].weight)
    nn.init.zeros_(model[2].bias)  # logits of exactly 0 until the first steps move them
    loss = nn.BCEWithLogitsLoss()
    report = train("loop", model, lambda m, x, y: loss(m(x).squeeze(1), y), binary)
    assert "TD303" not in report.codes()


def test_small_positive_logits_of_a_fresh_model_are_quiet() -> None:
    # A fresh discriminator's logits can all lie in (0, 0.3) for the first steps: logits
    # that happen to be in [0, 1] are no sigmoid (a DCGAN loop drew a false TD303 error).
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    with torch.no_grad():
        model[2].weight.mul_(0.05)
        model[2].bias.fill_(0.15)
    loss = nn.BCEWithLogitsLoss()
    report = train("loop", model, lambda m, x, y: loss(m(x).squeeze(1), y), binary)
    assert "TD303" not in report.codes()


def test_probabilities_clamped_after_the_sigmoid_are_found() -> None:
    loss = nn.BCEWithLogitsLoss()

    def clamped(m: Any, x: Any, y: Any) -> Any:
        return loss(m(x).sigmoid().clamp(1e-4, 1 - 1e-4).squeeze(1), y)

    assert "TD303" in run("loop", clamped, binary, 1)


def test_a_loss_below_zero_is_judged_only_on_the_passes_that_were_that_loss() -> None:
    # One backward site alternates a cross-entropy with a critic-style loss that is
    # negative by design; only the cross-entropy passes are bounded by 0.
    turn = iter(range(1000))

    def alternating(m: Any, x: Any, y: Any) -> Any:
        if next(turn) % 2:
            return -m(x).mean()
        return F.cross_entropy(m(x), y)

    assert not run("loop", alternating) & {"TD305", "TD309"}
