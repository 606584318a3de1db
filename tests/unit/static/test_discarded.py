"""TD224 tensor-result-discarded and TD225 grad-mode-call-without-with."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Applicability

HEADER = """
import torch
from torch import nn
from torch.utils.data import DataLoader
"""


def test_to_on_a_loader_batch_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(loader: DataLoader, device):
    for x, y in loader:
        x.to(device)  # expect: TD224
        y.cuda()  # expect: TD224
""",
        "TD224",
    )


def test_tensor_built_by_torch_is_flagged_with_a_safe_fix() -> None:
    source = (
        HEADER
        + """
def f(device):
    weights = torch.ones(3)
    weights.to(device)
"""
    )
    found = lint_findings(source, "TD224")
    assert [(f.code, f.location.line) for f in found] == [("TD224", 8)]
    fix = found[0].fix
    assert fix is not None and fix.applicability is Applicability.SAFE
    assert fix.edits[0].replacement == "weights = weights.to(device)"


def test_annotated_tensor_detach_is_flagged_with_an_unsafe_fix() -> None:
    source = (
        HEADER
        + """
def f(x: torch.Tensor) -> torch.Tensor:
    x.detach()
    return x
"""
    )
    found = lint_findings(source, "TD224")
    assert len(found) == 1 and found[0].fix is not None
    assert found[0].fix.applicability is Applicability.UNSAFE


def test_module_to_is_in_place_and_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def f(device):
    model = nn.Linear(2, 2)
    model.to(device)
    model.cuda()
    model.half()
""",
            "TD224",
        )
        == []
    )


def test_unknown_receivers_stay_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def f(thing, batch, loader, device):
    thing.to(device)
    batch.to(device)
    for batch in loader:
        batch.to(device)
    self_like = make()
    self_like.float()
""",
            "TD224",
        )
        == []
    )


def test_assigned_and_in_place_results_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def f(loader: DataLoader, device):
    for x, y in loader:
        x = x.to(device)
        y.requires_grad_()
        x.add_(1)
        x.detach_()
""",
            "TD224",
        )
        == []
    )


def test_bare_no_grad_and_inference_mode_are_flagged() -> None:
    assert_marked(
        HEADER
        + """
def evaluate(model, x):
    torch.no_grad()  # expect: TD225
    torch.autograd.inference_mode()  # expect: TD225
    return model(x)
""",
        "TD225",
    )


def test_grad_mode_in_with_or_decorator_or_set_grad_enabled_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
@torch.no_grad()
def evaluate(model, x):
    with torch.no_grad():
        y = model(x)
    torch.set_grad_enabled(False)
    guard = torch.enable_grad()
    return y
""",
            "TD225",
        )
        == []
    )


def test_a_local_function_named_no_grad_is_quiet() -> None:
    assert (
        lint_codes(
            """
def no_grad():
    pass

no_grad()
""",
            "TD225",
        )
        == []
    )


def test_elements_of_an_unpacked_batch_are_tensors() -> None:
    assert_marked(
        HEADER
        + """
def train(loader: DataLoader, device):
    for step, batch in enumerate(loader):
        inputs, labels = batch
        inputs.to(device)  # expect: TD224
    for i, (x, y) in enumerate(loader):
        y.cuda()  # expect: TD224
""",
        "TD224",
    )


def test_whole_batches_may_move_in_place_and_stay_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(loader: DataLoader, device):
    for step, batch in enumerate(loader):
        batch.to(device)
    for batch in loader:
        batch.to(device)
        features = batch
        features.to(device)
""",
            "TD224",
        )
        == []
    )
