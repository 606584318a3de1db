"""TD224 tensor-result-discarded and TD225 grad-mode-call-without-with."""

from __future__ import annotations

import pytest

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


def test_batches_of_a_loader_with_its_own_collate_fn_are_not_shown_to_be_tensors() -> None:
    # Round 35 (GCC): the collate function batches DGL graphs, whose `.to()` was in place
    # in the DGL the project used. A loader built with the default collation still
    # yields tensors, also when it reaches the loop through a caller.
    assert_marked(
        HEADER
        + """
import dgl

def collate(samples):
    graph_q, graph_k = zip(*samples)
    return dgl.batch(graph_q), dgl.batch(graph_k)

def embed(loader, device):
    for graph_q, graph_k in loader:
        graph_q.to(device)
        graph_k.to(device)

def train(loader, device):
    for x, y in loader:
        x.to(device)  # expect: TD224

def main(dataset, device):
    embed(DataLoader(dataset, batch_size=8, collate_fn=collate), device)
    train(DataLoader(dataset, batch_size=8), device)
    for x, y in DataLoader(dataset, collate_fn=collate):
        x.to(device)
    for x, y in DataLoader(dataset, collate_fn=None):
        x.to(device)  # expect: TD224
""",
        "TD224",
    )


def test_a_pure_torch_function_called_as_a_statement_is_flagged() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        class Loss(torch.nn.Module):
            def forward(self, x, labels):
                torch.clamp(self.w, 1e-6)  # expect: TD224
                F.normalize(x)  # expect: TD224
                torch.sigmoid(self.logits[0])  # expect: TD224
                return F.cross_entropy(x * self.w, labels)
        """
    assert_marked(source, "TD224")
    (found, *_) = lint_findings(source, "TD224")
    assert "`self.w` itself is unchanged (`clamp` is not in place)" in found.message
    assert "self.w.clamp_(...)" in found.fix_hint


def test_pure_functions_kept_or_called_for_errors_side_effects_or_timing_are_quiet() -> None:
    source = """
        import pytest
        import torch
        import torch.nn.functional as F

        def step(x, w, a, b):
            w = torch.clamp(w, 0)
            F.relu(x, inplace=True)
            torch.add(a, b, out=x)
            torch.mm(a, b)  # a warm-up call in a benchmark
            torch.nn.init.normal_(w)
            F.dropout(x)
            torch.clamp(x.sum(), 0)
            with pytest.raises(RuntimeError):
                torch.reshape(x, (7, 3))
            try:
                torch.squeeze(x)
            except RuntimeError:
                pass
        """
    assert lint_codes(source, "TD224") == []
    # Tests call operators for their errors on purpose.
    assert lint_codes("import torch\ntorch.clamp(w, 0)\n", "TD224", path="tests/test_ops.py") == []


_EVALUATION = """
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm


class Trainer:
    def get_dataloader(self, dataset) -> DataLoader:
        return DataLoader(dataset, batch_size=8{collate})

    def load(self, val_set, test_set):
        self.val_loader = self.get_dataloader(val_set)
        self.test_loader = self.get_dataloader(test_set)

    def validate(self, model, split):
        loader = self.val_loader if split == "val" else self.test_loader
        for _i, {target} in tqdm(enumerate(loader), total=len(loader)):
            {moved}.to("cuda")
            print(model({moved}))
"""


@pytest.mark.parametrize(
    ("collate", "target", "moved", "flagged"),
    [
        # fairchem: a whole batch (inside tqdm(enumerate(...))) of a loader chosen among
        # loaders that collate graphs, whose .to() works in place
        (", collate_fn=collate_graphs", "batch", "batch", False),
        ("", "batch", "batch", False),  # a whole default batch: a list, not shown a tensor
        # what a collate_fn of the chosen loaders returns is not shown to be tensors
        (", collate_fn=collate_graphs", "(x, y)", "x", False),
        # a tensor unpacked from each default batch: its .to() result is lost
        ("", "(x, y)", "x", True),
    ],
)
def test_td224_a_batch_of_an_enumerated_loader_in_a_progress_bar(
    collate: str, target: str, moved: str, flagged: bool
) -> None:
    source = _EVALUATION.format(collate=collate, target=target, moved=moved)
    assert bool(lint_codes(source, "TD224")) is flagged


@pytest.mark.parametrize(
    ("source", "severity"),
    [
        # Meta's GEMM benchmark: a global result, copied after the timer, never read again
        (
            "c = None\n\ndef bench(a, b):\n    global c\n    c = torch.mm(a, b)\n    c.to('cpu')\n",
            "info",
        ),
        ("def bench(a, b):\n    c = torch.mm(a, b)\n    c.to('cpu')\n    return 1\n", "info"),
        # read again, a parameter the caller keeps, or an alias of another object: an error
        ("def bench(a, b):\n    c = torch.mm(a, b)\n    c.to('cpu')\n    return c\n", "error"),
        ("def bench(c: torch.Tensor):\n    c.to('cpu')\n", "error"),
        (
            "def bench(a, b):\n    c = torch.mm(a, b)\n    c.to('cpu')\n    print(c.sum())\n",
            "error",
        ),
        (
            "c = None\n\ndef bench(a, b):\n    global c\n    c = torch.mm(a, b)\n"
            "    c.to('cpu')\n\ndef show():\n    print(c)\n",
            "error",
        ),
    ],
)
def test_a_copy_dropped_from_a_result_nothing_reads_is_information(
    source: str, severity: str
) -> None:
    (found,) = lint_findings(HEADER + source, "TD224")
    assert found.severity.value == severity
