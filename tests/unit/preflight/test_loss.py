"""TD301/302/303/305 scores of the wrong kind for the loss, TD306 silent broadcasting."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402
from torchdoctor.findings import Confidence  # noqa: E402

pytestmark = pytest.mark.needs_torch

WIRING = ("TD301", "TD302", "TD303", "TD305")


class Ending(nn.Module):
    """The classifier followed by a final op, written in the model's own forward."""

    def __init__(self, final) -> None:
        super().__init__()
        self.body = classifier()
        self.final = final

    def forward(self, x):
        return self.final(self.body(x))


def _codes(model, loss, batch=None) -> set[str]:
    return run(model, batch or class_batch(), loss, *WIRING).codes()


# --- positives ---------------------------------------------------------------------------


def test_softmax_in_forward_with_cross_entropy_points_at_the_line() -> None:
    report = run(
        Ending(lambda z: torch.softmax(z, dim=1)), class_batch(), nn.CrossEntropyLoss(), *WIRING
    )
    [found] = report.by_code("TD301")
    assert found.location.path.endswith("test_loss.py") and "softmax" in found.location.snippet
    assert "0.74 to 1.74 here" in found.message  # ln(e + 3) = 1.74 for 4 classes
    assert found.confidence is Confidence.HIGH


def test_softmax_module_at_the_end_of_a_sequential_is_located_by_module() -> None:
    model = nn.Sequential(classifier(), nn.Softmax(dim=1))
    [found] = run(model, class_batch(), nn.CrossEntropyLoss(), *WIRING).by_code("TD301")
    assert found.location.object == "1"


def test_softmax_inside_a_loss_wrapper_is_seen_through() -> None:
    def loss(output, target):
        return F.cross_entropy(output.softmax(1), target)

    assert _codes(classifier(), loss) == {"TD301"}


def test_hand_written_softmax_is_recognised_from_values() -> None:
    report = run(
        Ending(lambda z: z.exp() / z.exp().sum(1, keepdim=True)),
        class_batch(),
        nn.CrossEntropyLoss(),
        *WIRING,
    )
    [found] = report.by_code("TD301")
    assert found.confidence is Confidence.MEDIUM


def test_log_softmax_with_cross_entropy_is_info() -> None:
    assert _codes(Ending(lambda z: F.log_softmax(z, 1)), nn.CrossEntropyLoss()) == {"TD302"}


def test_sigmoid_before_bce_with_logits_through_a_view() -> None:
    inputs, _ = class_batch()
    targets = torch.randint(0, 2, (32, 4)).float()
    model = Ending(lambda z: torch.sigmoid(z).reshape(32, 4))
    assert _codes(model, nn.BCEWithLogitsLoss(), (inputs, targets)) == {"TD303"}


def test_raw_scores_to_nll() -> None:
    report = run(classifier(), class_batch(), nn.NLLLoss(), *WIRING)
    assert "receives raw scores" in messages(report, "TD305")


def test_probabilities_to_nll() -> None:
    report = run(Ending(lambda z: z.softmax(1)), class_batch(), F.nll_loss, *WIRING)
    assert "probabilities (softmax output)" in messages(report, "TD305")


# --- negatives ---------------------------------------------------------------------------


def test_logits_with_cross_entropy_are_quiet() -> None:
    assert _codes(classifier(), nn.CrossEntropyLoss()) == set()


def test_logits_with_label_smoothing_partial_are_quiet() -> None:
    assert _codes(classifier(), functools.partial(F.cross_entropy, label_smoothing=0.1)) == set()


def test_log_softmax_with_nll_is_quiet() -> None:
    assert _codes(Ending(lambda z: F.log_softmax(z, 1)), nn.NLLLoss()) == set()


def test_hand_written_log_softmax_with_nll_is_quiet() -> None:
    model = Ending(lambda z: z - z.logsumexp(1, keepdim=True))
    assert _codes(model, nn.NLLLoss()) == set()


def test_focal_weighted_log_softmax_with_nll_is_quiet() -> None:
    # (1 - p) ** gamma * log_p: down-weighted log-probabilities, all <= 0, built from
    # log_softmax inside the loss (tests/corpus/clean/focal_loss_imbalanced.py).
    def focal(logits, target):
        log_prob = F.log_softmax(logits, dim=1)
        return F.nll_loss((1 - log_prob.exp()) ** 2.0 * log_prob, target)

    assert _codes(classifier(), focal) == set()


def test_log_softmax_through_a_temperature_and_mask_with_nll_is_quiet() -> None:
    # The last op is a Mul, but the graph leads back to log_softmax through arithmetic.
    def masked(logits, target):
        log_prob = F.log_softmax(logits / 2.0, dim=1) * 3.0
        return F.nll_loss(log_prob.masked_fill(torch.zeros_like(log_prob).bool(), 0.0), target)

    assert _codes(classifier(), masked) == set()


def test_non_positive_scores_with_nll_are_quiet() -> None:
    # Log-probabilities scaled by per-class weights in [0, 1], with no log_softmax in view.
    weights = torch.tensor([0.25, 0.5, 1.0, 1.0])
    model = Ending(lambda z: (z - z.logsumexp(1, keepdim=True)) * weights)
    assert _codes(model, nn.NLLLoss()) == set()


def test_raw_scores_scaled_inside_the_loss_to_nll_are_found() -> None:
    # Arithmetic on raw logits does not make them log-probabilities.
    def scaled(logits, target):
        return F.nll_loss(logits * 0.5 + 0.1, target)

    report = run(classifier(), class_batch(), scaled, *WIRING)
    assert "receives raw scores" in messages(report, "TD305")


def test_log_softmax_before_a_linear_layer_does_not_excuse_raw_scores() -> None:
    # A layer with weights after log_softmax produces raw scores again.
    model = nn.Sequential(classifier(), nn.LogSoftmax(dim=1), nn.Linear(4, 4))
    assert _codes(model, nn.NLLLoss()) == {"TD305"}


def test_sigmoid_with_bce_is_not_this_rule() -> None:
    inputs, _ = class_batch()
    targets = torch.randint(0, 2, (32, 4)).float()
    assert _codes(Ending(torch.sigmoid), nn.BCELoss(), (inputs, targets)) == set()


def test_logits_with_bce_with_logits_are_quiet() -> None:
    inputs, _ = class_batch()
    targets = torch.randint(0, 2, (32, 4)).float()
    assert _codes(classifier(), nn.BCEWithLogitsLoss(), (inputs, targets)) == set()


def test_positive_logits_that_look_like_probabilities_per_value_are_quiet() -> None:
    # ReLU outputs in [0, 1) whose rows do not sum to 1 are not probabilities.
    model = Ending(lambda z: torch.relu(z) * 0.1)
    assert _codes(model, nn.CrossEntropyLoss()) == set()


def test_softmax_used_for_attention_inside_the_model_is_quiet() -> None:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = classifier(classes=8)
            self.head = nn.Linear(8, 4)

        def forward(self, x):
            hidden = self.body(x)
            return self.head(hidden * torch.softmax(hidden, dim=1))

    assert _codes(Attention(), nn.CrossEntropyLoss()) == set()


# --- TD306 -------------------------------------------------------------------------------


def _regressor() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))


def _regression_batch() -> tuple[torch.Tensor, torch.Tensor]:
    inputs, _ = class_batch()
    return inputs, inputs[:, 0] * 2


def test_n_by_1_output_against_n_targets_in_mse() -> None:
    [found] = run(_regressor(), _regression_batch(), nn.MSELoss(), "TD306").by_code("TD306")
    assert "[32, 1]" in found.message and "broadcast to [32, 32]" in found.message
    assert "1024 pairs instead of 32" in found.message


def test_hand_written_mse_broadcast_is_found_empirically() -> None:
    def loss(output, target):
        return ((output - target) ** 2).mean()

    assert run(_regressor(), _regression_batch(), loss, "TD306").by_code("TD306")


def test_bce_with_mismatched_shapes_is_found_although_torch_raises() -> None:
    inputs, targets = _regression_batch()
    report = run(_regressor(), (inputs, (targets > 0).float()), nn.BCEWithLogitsLoss(), "TD306")
    assert report.by_code("TD306")


def test_matching_shapes_are_quiet() -> None:
    inputs, targets = _regression_batch()
    report = run(_regressor(), (inputs, targets[:, None]), nn.MSELoss(), "TD306")
    assert not report.by_code("TD306")


def test_custom_loss_that_squeezes_itself_is_quiet() -> None:
    def loss(output, target):
        return ((output.squeeze(-1) - target) ** 2).mean()

    assert not run(_regressor(), _regression_batch(), loss, "TD306").by_code("TD306")


def test_class_index_targets_are_not_broadcasting() -> None:
    assert not run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD306").by_code("TD306")


def test_per_sample_weights_broadcast_inside_a_custom_loss_are_quiet() -> None:
    inputs, targets = _regression_batch()

    def loss(output, target):
        return F.mse_loss(output, target[:, None])

    assert not run(_regressor(), (inputs, targets), loss, "TD306").by_code("TD306")
