"""TD301/TD303/TD305 found through function parameters (loss helpers, models and
criteria passed in)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.rules.selection import Selection
from torchdoctor.static import LintConfig, lint
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


# --- a sigmoid head a model factory adds under a config switch -------------------------

CONFIGURED = """
import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {{"model": {{"width": 8, "output": "{output}"}}, "loss": "{loss}"}}
LOSSES = {{"bce_logits": F.binary_cross_entropy_with_logits, "bce": F.binary_cross_entropy}}

def build_scorer(cfg):
    layers = [nn.Linear(4, cfg["width"]), nn.ReLU()]
    for _ in range(2):
        layers += [nn.Linear(cfg["width"], cfg["width"]), nn.ReLU()]
    layers.append(nn.Linear(cfg["width"], 1))
    if cfg.get("output") == "probability":
        layers.append(nn.Sigmoid())
{after}
    return nn.Sequential(*layers)

def build(cfg):
    model = build_scorer(cfg["model"])
    return model, LOSSES[cfg["loss"]]

def main(loader):
{setup}
    model, loss_fn = build(CONFIG)
    for x, y in loader:
        loss = loss_fn(model(x).squeeze(-1), y)
        loss.backward()
"""


def configured(
    output: str = "probability", loss: str = "bce_logits", after: str = "", setup: str = ""
) -> list[tuple[str, int]]:
    source = CONFIGURED.format(
        output=output, loss=loss, after=after or "    pass", setup=setup or "    pass"
    )
    return lint_codes(source, "TD303", "TD001")


def test_a_factory_sigmoid_chosen_by_the_config_into_the_configured_logits_loss() -> None:
    assert configured() == [("TD303", 27)]


def test_the_message_names_the_factory_its_layer_and_the_switch() -> None:
    source = CONFIGURED.format(
        output="probability", loss="bce_logits", after="    pass", setup="    pass"
    )
    (found,) = lint_findings(source, "TD303")
    assert "`build_scorer` ends in `nn.Sigmoid()` (train.py:15)" in found.message
    assert "output" in found.message and "probability" in found.message


def test_a_config_that_asks_for_logits_is_quiet() -> None:
    assert configured(output="logits") == []


def test_a_config_that_picks_a_plain_bce_is_not_td303() -> None:
    assert configured(loss="bce") == []


def test_a_config_the_program_changes_is_quiet() -> None:
    assert configured(setup='    CONFIG["model"]["output"] = OUTPUT') == []
    assert configured(setup="    CONFIG.update(load_overrides())") == []


def test_a_layer_list_changed_after_the_switch_is_quiet() -> None:
    assert configured(after="    layers = layers[:-1]") == []
    assert configured(after="    add_head(layers)") == []
    assert configured(after="    if CALIBRATED:\n        layers.append(nn.Identity())") == []
    # a key the complete config literal lacks reads as None: that switch stays off
    assert configured(
        after="    if cfg.get('calibrated'):\n        layers.append(nn.Identity())"
    ) == [("TD303", 28)]


def test_a_switch_on_a_value_the_file_cannot_read_is_quiet() -> None:
    source = """
    import argparse
    import torch.nn.functional as F
    from torch import nn
    def build_scorer(cfg):
        layers = [nn.Linear(4, 1)]
        if cfg.output == "probability":
            layers.append(nn.Sigmoid())
        return nn.Sequential(*layers)
    def main(loader, args):
        model = build_scorer(args)
        for x, y in loader:
            F.binary_cross_entropy_with_logits(model(x), y).backward()
    """
    assert lint_codes(source, "TD303", "TD001") == []


def test_a_factory_that_always_ends_in_sigmoid_into_bce_with_logits() -> None:
    source = """
    from torch import nn
    def make_model(width=8):
        layers = [nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1)]
        layers.append(nn.Sigmoid())
        return nn.Sequential(*layers)
    def main(loader):
        model = make_model().to("cpu")
        criterion = nn.BCEWithLogitsLoss()
        for x, y in loader:
            out = model(x)
            criterion(out, y).backward()  # expect: TD303
    """
    assert_marked(source, "TD303")


FACTORY_MODULE = """
import torch.nn as nn

def build_scorer(cfg):
    layers = [nn.Linear(cfg["in"], 1)]
    if cfg.get("head") == "sigmoid":
        layers.append(nn.Sigmoid())
    return nn.Sequential(*layers)
"""

SCRIPT = """
import torch.nn.functional as F
from scorers import build_scorer

CONFIG = {{"in": 4, "head": "{head}"}}

def main(loader):
    model = build_scorer(CONFIG)
    for x, y in loader:
        F.binary_cross_entropy_with_logits(model(x), y).backward()
"""


def _lint_files(tmp_path: Path, head: str, target: str) -> list[tuple[str, int]]:
    (tmp_path / "scorers.py").write_text(FACTORY_MODULE)
    (tmp_path / "train.py").write_text(SCRIPT.format(head=head))
    report = lint(tmp_path / target if target else tmp_path, config=LintConfig(), jobs=1)
    return [(f.code, f.location.line or 0) for f in report.findings if f.code in ("TD303", "TD001")]


def test_a_factory_of_another_module_is_read_for_the_whole_project(tmp_path: Path) -> None:
    assert _lint_files(tmp_path, "sigmoid", "") == [("TD303", 10)]


def test_a_factory_beside_a_script_linted_alone_is_read(tmp_path: Path) -> None:
    assert _lint_files(tmp_path, "sigmoid", "train.py") == [("TD303", 10)]
    assert _lint_files(tmp_path, "none", "train.py") == []
