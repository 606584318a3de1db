"""TD102 float64, TD103 mixed parameter dtypes, TD104 target dtype for the loss."""

from __future__ import annotations

import functools

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from tests.unit.preflight.helpers import class_batch, classifier, messages, run  # noqa: E402

pytestmark = pytest.mark.needs_torch


# --- TD102 -------------------------------------------------------------------------------


def test_float64_model_is_one_finding_naming_the_model() -> None:
    inputs, targets = class_batch()
    report = run(classifier().double(), (inputs.double(), targets), nn.CrossEntropyLoss(), "TD102")
    text = messages(report, "TD102")
    assert "All 4 parameters of Sequential are float64" in text
    assert "`inputs` (shape [32, 8]) is float64" in text
    assert "made float64 to match it" in text


def test_float64_inputs_against_float32_weights_are_found_before_the_forward_fails() -> None:
    inputs, targets = class_batch()
    report = run(classifier(), (inputs.double(), targets), nn.CrossEntropyLoss(), "TD102")
    [found] = report.by_code("TD102")
    assert found.location.object == "inputs" and "float32 weights" in found.message


def test_float64_regression_targets_are_found() -> None:
    inputs, _ = class_batch()
    targets = torch.randn(32, 4, dtype=torch.float64)
    report = run(classifier(), (inputs, targets), nn.MSELoss(), "TD102")
    assert [f.location.object for f in report.by_code("TD102")] == ["targets"]


def test_float32_everything_is_quiet() -> None:
    report = run(classifier(), class_batch(), nn.CrossEntropyLoss(), "TD102")
    assert not report.by_code("TD102")


def test_integer_and_half_tensors_are_not_float64() -> None:
    inputs, targets = class_batch()
    model = classifier().half().float()  # round trip leaves float32
    report = run(model, (inputs, targets.to(torch.int64)), nn.CrossEntropyLoss(), "TD102")
    assert not report.by_code("TD102")


# --- TD103 -------------------------------------------------------------------------------


def test_half_layer_in_float32_model_is_named() -> None:
    model = classifier()
    model[0].to(torch.bfloat16)
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD103")
    [found] = report.by_code("TD103")
    assert "2 bfloat16, 2 float32" in found.message and "not float32" in found.message
    assert found.location.object == "0.weight"


def test_float32_normalisation_in_half_model_is_quiet() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 4))
    model.to(torch.bfloat16)
    model[1].float()  # a common, deliberate practice
    report = run(model, class_batch(), nn.CrossEntropyLoss(), "TD103")
    assert not report.by_code("TD103"), messages(report, "TD103")


def test_uniform_half_model_is_quiet() -> None:
    report = run(classifier().to(torch.bfloat16), class_batch(), nn.CrossEntropyLoss(), "TD103")
    assert not report.by_code("TD103")


# --- TD104 -------------------------------------------------------------------------------


def test_float_class_indices_for_cross_entropy() -> None:
    inputs, targets = class_batch()
    report = run(classifier(), (inputs, targets.float()), nn.CrossEntropyLoss(), "TD104")
    [found] = report.by_code("TD104")
    assert "class indices must be int64; they are float32" in found.message
    assert "targets.long()" in found.fix_hint


def test_int32_class_indices_through_a_partial() -> None:
    inputs, targets = class_batch()
    loss = functools.partial(F.cross_entropy, label_smoothing=0.1)
    report = run(classifier(), (inputs, targets.int()), loss, "TD104")
    assert "they are int32" in messages(report, "TD104")


def test_integer_targets_for_bce_with_logits() -> None:
    inputs, _ = class_batch()
    targets = torch.randint(0, 2, (32, 4))
    report = run(classifier(), (inputs, targets), nn.BCEWithLogitsLoss(), "TD104")
    assert "binary targets must be floating" in messages(report, "TD104")
    assert "targets.float()" in report.by_code("TD104")[0].fix_hint


def test_one_hot_integer_targets_for_cross_entropy() -> None:
    inputs, targets = class_batch()
    one_hot = F.one_hot(targets, 4)
    report = run(classifier(), (inputs, one_hot), nn.CrossEntropyLoss(), "TD104")
    assert "one-hot" in messages(report, "TD104")


def test_int64_and_uint8_class_indices_are_quiet() -> None:
    inputs, targets = class_batch()
    for labels in (targets, targets.to(torch.uint8)):
        report = run(classifier(), (inputs, labels), nn.CrossEntropyLoss(), "TD104")
        assert not report.by_code("TD104"), messages(report, "TD104")


def test_float_probability_targets_for_cross_entropy_are_quiet() -> None:
    inputs, targets = class_batch()
    soft = F.one_hot(targets, 4).float() * 0.9 + 0.025
    report = run(classifier(), (inputs, soft), nn.CrossEntropyLoss(), "TD104")
    assert not report.by_code("TD104"), messages(report, "TD104")


def test_wrapper_that_converts_the_labels_is_quiet() -> None:
    inputs, targets = class_batch()

    def loss(output, labels):
        return F.cross_entropy(output, labels.long())

    report = run(classifier(), (inputs, targets.float()), loss, "TD104")
    assert not report.by_code("TD104"), messages(report, "TD104")


def test_integer_targets_for_mse_are_quiet() -> None:
    inputs, _ = class_batch()
    report = run(classifier(), (inputs, torch.randint(0, 5, (32, 4))), nn.MSELoss(), "TD104")
    assert not report.by_code("TD104")


def test_uniform_bfloat16_training_is_not_float64() -> None:
    inputs, targets = class_batch()
    report = run(
        classifier().to(torch.bfloat16),
        (inputs.to(torch.bfloat16), targets),
        nn.CrossEntropyLoss(),
        "TD102",
    )
    assert not report.by_code("TD102")
