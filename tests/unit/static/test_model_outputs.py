"""TD301/TD303/TD305 found through function parameters (loss helpers, models and
criteria passed in)."""

from __future__ import annotations

import textwrap

from tests.unit.static.helpers import assert_marked, lint_codes
from torchdoctor.rules.selection import Selection
from torchdoctor.static.runner import lint_sources

HEADER = """
import torch
from torch import nn
import torch.nn.functional as F

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return torch.sigmoid(self.fc(x))

class Softmaxed(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 3), nn.Softmax(dim=1))

    def forward(self, x):
        return self.net(x)

class Raw(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.act = nn.ReLU()

    def forward(self, x):
        x = self.act(x)
        return self.fc(x)

class Logits(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)
"""


def test_loss_helper_fed_a_sigmoid_model_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
BCE = nn.BCEWithLogitsLoss()

def compute_loss(out, y):
    return BCE(out, y)

def main(x, y):
    model = Tagger()
    out = model(x)
    loss = compute_loss(out, y)  # expect: TD303
""",
        "TD303",
    )


def test_model_passed_to_a_training_function_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, loader):
    ce = nn.CrossEntropyLoss()
    nll = nn.NLLLoss()
    for x, y in loader:
        loss = ce(model(x), y)  # expect: TD301
        loss.backward()

def train_nll(net, loader):
    for x, y in loader:
        F.nll_loss(net(x), y).backward()  # expect: TD305

def main(loader):
    train(Softmaxed(), loader)
    train_nll(Raw(), loader)
""",
        "TD301",
        "TD305",
    )


def test_criterion_passed_in_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def step(model, loss_fn, x, y):
    return loss_fn(model(x), y)  # expect: TD303

def main(x, y):
    step(Tagger(), nn.BCEWithLogitsLoss(), x, y)
""",
        "TD303",
    )


def test_logits_through_helpers_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
BCE = nn.BCEWithLogitsLoss()

def compute_loss(out, y):
    return BCE(out, y)

def train(model, loader):
    ce = nn.CrossEntropyLoss()
    for x, y in loader:
        ce(model(x), y).backward()

def step(model, loss_fn, x, y):
    return loss_fn(model(x), y)

def main(loader, x, y):
    compute_loss(Logits()(x), y)
    train(Logits(), loader)
    step(Tagger(), nn.BCELoss(), x, y)
    step(Logits(), nn.CrossEntropyLoss(), x, y)
""",
            "TD301",
            "TD303",
            "TD305",
        )
        == []
    )


def test_unknown_callers_and_mixed_criteria_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader):
    ce = nn.CrossEntropyLoss()
    for x, y in loader:
        ce(model(x), y).backward()

def step(model, loss_fn, x, y):
    return loss_fn(model(x), y)

def compute(out, y):
    return F.cross_entropy(out, y)

def main(x, y, external_model):
    step(Tagger(), nn.BCEWithLogitsLoss(), x, y)
    step(Tagger(), nn.BCELoss(), x, y)
    compute(external_model(x), y)
""",
            "TD301",
            "TD303",
            "TD305",
        )
        == []
    )


def test_not_double_reported_with_the_local_loss_rule() -> None:
    found = lint_codes(
        HEADER
        + """
def main(x, y):
    model = Tagger()
    loss = nn.BCEWithLogitsLoss()(model(x), y)
""",
        "TD303",
    )
    assert len(found) == 1


_NET = """
import torch
from torch import nn

class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.out = nn.Sigmoid()

    def forward(self, x):
        return self.out(self.fc(x))

class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x)
"""


def _project(train: str, *, extra: tuple[tuple[str, str], ...] = ()) -> list[tuple[str, int]]:
    sources = [
        ("proj/models/net.py", textwrap.dedent(_NET)),
        ("proj/train.py", textwrap.dedent(train)),
        *extra,
    ]
    found = lint_sources(sources, Selection.from_options(("TD301", "TD303", "TD305")))
    return sorted(
        (f.code, f.location.line or 0)
        for f in found
        if f.location.path and f.location.path.endswith("train.py")
    )


def test_model_class_of_another_file_is_found_through_the_project_index() -> None:
    assert _project("""
from torch import nn
from models.net import Tagger

def main(loader):
    model = Tagger()
    crit = nn.BCEWithLogitsLoss()
    for x, y in loader:
        out = model(x)
        crit(out, y).backward()
""") == [("TD303", 10)]


def test_logits_of_another_file_and_ambiguous_classes_are_quiet() -> None:
    """Two files named net.py: a dotted name that names neither folder is not guessed."""
    other = ("proj/other/net.py", textwrap.dedent(_NET))
    train = """
from torch import nn
from {module} import Plain, Tagger

def main(loader):
    model = Plain()
    tagger = Tagger()
    crit = nn.BCEWithLogitsLoss()
    for x, y in loader:
        crit(model(x), y).backward()
        crit(tagger(x), y).backward()
"""
    assert _project(train.format(module="lib.net"), extra=(other,)) == []
    # A dotted name picks its file by folder, even without __init__.py (a namespace
    # package): `models.net` is proj/models/net.py, whose Tagger ends in a sigmoid.
    assert _project(train.format(module="models.net"), extra=(other,)) == [("TD303", 11)]
