"""The project index: classes and functions across files, without importing anything."""

from __future__ import annotations

import ast
import pickle
import textwrap
from pathlib import Path

import pytest

from torchdoctor.static import LintConfig, lint, runner
from torchdoctor.static.project import ProjectIndex
from torchdoctor.static.project_facts import module_name, summarise


def index(**files: str) -> ProjectIndex:
    return ProjectIndex(
        summarise(f"/p/{name}.py", ast.parse(textwrap.dedent(text)), name)
        for name, text in files.items()
    )


NETS = """
import torch
from torch import nn
import torch.nn.functional as F

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(8)
    def forward(self, x):
        return self.norm(x)

class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
    def forward(self, x):
        return torch.sigmoid(self.fc(x))

class Wrapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(8, 2), nn.Softmax(dim=-1))
    def forward(self, x):
        return self.head(self.block(x))

class Branching(Plain):
    def forward(self, x):
        if self.training:
            return x
        return F.log_softmax(x, dim=-1)

class Unknown(SomeBase):
    pass

def make():
    model = Wrapped()
    return model
"""


def test_classes_answer_across_the_project() -> None:
    project = index(nets=NETS)
    block = project.module_class("nets.Block")
    plain = project.module_class("nets.Plain")
    wrapped = project.module_class("nets.Wrapped")
    assert block is not None and plain is not None and wrapped is not None
    assert block.has_dropout_or_batchnorm is True
    assert plain.has_dropout_or_batchnorm is False
    assert wrapped.has_dropout_or_batchnorm is True  # through Block, built in __init__
    assert plain.forward_ends_in == "sigmoid"
    assert wrapped.forward_ends_in == "softmax"  # its head is a Sequential ending in one
    assert block.forward_ends_in is None
    assert wrapped.attributes["block"] == "nets.Block"
    assert block.is_module is True


def test_inheritance_and_unknowns() -> None:
    project = index(nets=NETS)
    branching = project.module_class("nets.Branching")
    unknown = project.module_class("nets.Unknown")
    assert branching is not None and unknown is not None
    assert branching.has_dropout_or_batchnorm is True  # reads self.training
    assert branching.forward_ends_in is None  # not every return ends the same way
    assert branching.subclasses("nets.Plain") and branching.subclasses("torch.nn.Module")
    assert branching.is_module is True
    assert unknown.is_module is None  # a base from nowhere: cannot be told
    assert project.module_class("Block") is not None  # a unique bare name
    assert project.module_class("nets.Missing") is None


def test_functions_and_what_they_return() -> None:
    project = index(nets=NETS)
    make = project.function("nets.make")
    assert make is not None
    assert make.returns == ("nets.Wrapped",)
    assert "nets.Wrapped" in make.calls
    assert project.function("nets.nothing") is None


def test_facts_sent_to_another_process_or_completed_answer_alike_and_hold_no_tree() -> None:
    """Bodies are read on first question; a pickled copy (what pool workers get) and a
    completed one (a tree freed before phase two) carry the answers, not the tree."""
    facts = summarise("/p/nets.py", ast.parse(textwrap.dedent(NETS)), "nets")
    copied = pickle.loads(pickle.dumps(facts))
    facts.complete()
    for module in (facts, copied):
        project = ProjectIndex([module])
        wrapped = project.module_class("nets.Wrapped")
        plain = project.module_class("nets.Plain")
        make = project.function("nets.make")
        assert wrapped is not None and plain is not None and make is not None
        assert wrapped.has_dropout_or_batchnorm is True
        assert plain.forward_ends_in == "sigmoid"
        assert make.returns == ("nets.Wrapped",)
        for held in [*module.classes.values(), *module.functions.values()]:
            assert not any(isinstance(part, ast.AST) for part in _reachable(held))


def _reachable(obj: object) -> list[object]:
    """Everything an object holds through its slots, tuples, dicts and dataclasses."""
    out: list[object] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        out.append(item)
        if isinstance(item, (tuple, list, frozenset, set)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        else:
            for cls in type(item).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    stack.append(getattr(item, slot, None))
    return out


def test_relative_imports_and_reexports_resolve() -> None:
    files = {
        "/p/pkg/models.py": "from .layers import Head\nclass M(Head):\n    pass\n",
        "/p/pkg/layers.py": "import torch\nclass Head(torch.nn.Dropout):\n    pass\n",
        "/p/pkg/__init__.py": "from .models import M\n",
    }
    project = ProjectIndex(
        summarise(path, ast.parse(text), name)
        for (path, text), name in zip(
            files.items(), ["pkg.models", "pkg.layers", "pkg"], strict=True
        )
    )
    model = project.module_class("pkg.M")
    assert model is not None and model.qualname == "pkg.models.M"
    assert model.has_dropout_or_batchnorm is True


PHYSICS_MODELS = {
    "/p/pkg/layers/__init__.py": "from .activations import get_activation\n",
    "/p/pkg/layers/activations.py": """
import torch.nn as nn
KINDS = {"relu": nn.ReLU, "gelu": nn.GELU}
def get_activation(name):
    return KINDS[name]()
""",
    "/p/pkg/module.py": """
import fsspec
import requests
import torch
from tqdm import tqdm
class Module(torch.nn.Module):
    @classmethod
    def from_checkpoint(cls, path):
        fs = fsspec.filesystem("s3")
        session = requests.Session()
        for _ in tqdm(range(3)):
            pass
        Module._check_checkpoint(path)
    @staticmethod
    def _check_checkpoint(path):
        return path
""",
    "/p/pkg/fno.py": """
import torch.nn as nn
from pkg.layers import get_activation
from pkg.module import Module
class FNO(Module):
    def __init__(self):
        super().__init__()
        self.lift = nn.Conv2d(3, 8, 1)
        self.act = get_activation("gelu")
""",
}


@pytest.mark.parametrize(
    "change, sensitive",
    [
        ((), False),
        ((("return KINDS[name]()", "return nn.Dropout(0.1)"),), True),
        (
            (
                ("import requests", "import timm"),
                ("requests.Session()", "timm.create_model('vit')"),
            ),
            None,
        ),
    ],
)
def test_a_model_built_through_reexported_helpers_on_a_checkpointing_base(
    change: tuple[tuple[str, str], ...], sensitive: bool | None
) -> None:
    """physicsnemo: FNO builds its activation through ``get_activation``, re-exported by
    the ``layers`` package, and derives from a base whose checkpoint loader calls fsspec,
    requests, tqdm and its own static method. None of those builds a layer, so the
    model is provably mode-free; a dropout through the same helpers, or a model zoo
    called by the base, is not."""
    files = dict(PHYSICS_MODELS)
    for old, new in change:
        files = {path: text.replace(old, new) for path, text in files.items()}
    names = ["pkg.layers", "pkg.layers.activations", "pkg.module", "pkg.fno"]
    project = ProjectIndex(
        summarise(path, ast.parse(textwrap.dedent(text)), name)
        for (path, text), name in zip(files.items(), names, strict=True)
    )
    model = project.module_class("pkg.fno.FNO")
    assert model is not None and model.has_dropout_or_batchnorm is sensitive


def test_module_names_follow_packages(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    assert module_name(str(tmp_path / "pkg" / "sub" / "net.py")) == "pkg.sub.net"
    assert module_name(str(tmp_path / "pkg" / "__init__.py")) == "pkg"
    assert module_name(str(tmp_path / "script.py")) == "script"


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))


_EVAL = """
import torch
import model as models

def evaluate(net, loader):
    with torch.no_grad():
        for x, y in loader:
            net(x)

def main(loader):
    net = models.Net()
    evaluate(net, loader)
"""


def test_a_model_class_of_another_file_decides_td501(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "train.py": _EVAL,
            "model.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)
            def forward(self, x):
                return self.drop(x)
        """,
        },
    )
    found = [
        (Path(f.location.path).name, f.location.line)
        for f in lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings
    ]
    assert found == [("train.py", 8)]


def test_a_model_class_of_another_file_without_dropout_keeps_td501_quiet(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "train.py": _EVAL,
            "model.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
            def forward(self, x):
                return self.fc(x)
        """,
        },
    )
    assert lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings == []


_FROZEN_AUTOENCODER = """
import torch
import torch.nn as nn
class FrozenAutoencoder(nn.Module):
    def __init__(self, path):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
        self.load_state_dict(torch.load(path))
        self.eval()
        self.requires_grad_(False)
        {late}
    def forward(self, x):
        return self.encoder(x)
def get_model(path):
    return FrozenAutoencoder(path)
"""

_EXTRACT = """
import torch
import libs.autoencoder
def main(batches):
    autoencoder = libs.autoencoder.get_model("ae.pth")
    with torch.no_grad():
        for x in batches:
            autoencoder(x)
"""


@pytest.mark.parametrize(
    ("late", "flagged"),
    [
        ("", []),
        ("self.head = nn.Dropout(0.5)", [("extract.py", 8)]),
    ],
)
def test_td501_quiet_for_a_model_whose_constructor_of_another_file_calls_eval(
    tmp_path: Path, late: str, flagged: list[tuple[str, int]]
) -> None:
    """U-ViT's feature extraction: a factory of another file builds a class whose
    ``__init__`` ends in ``self.eval()``; a layer built after the ``eval()`` starts in
    training mode, so that model is still flagged."""
    (tmp_path / "libs").mkdir()
    _write(
        tmp_path,
        {
            "extract.py": _EXTRACT,
            "libs/__init__.py": "",
            "libs/autoencoder.py": _FROZEN_AUTOENCODER.format(late=late),
        },
    )
    found = [
        (Path(f.location.path).name, f.location.line)
        for f in lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings
    ]
    assert found == flagged


def test_td501_quiet_when_eval_ran_first_and_the_loop_calls_a_loss(tmp_path: Path) -> None:
    # The shape of a language-model evaluation: eval() at the top, a criterion in the loop.
    _write(
        tmp_path,
        {
            "main.py": """
        import torch
        import torch.nn as nn
        import model
        net = model.RNN()
        criterion = nn.NLLLoss()
        def evaluate(source):
            net.eval()
            total = 0.0
            with torch.no_grad():
                for i in range(0, 10):
                    output = net(source[i])
                    total += criterion(output, source[i + 1]).item()
            return total
        """,
            "model.py": """
        import torch.nn as nn
        class RNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.2)
                self.rnn = nn.LSTM(4, 4)
        """,
        },
    )
    assert lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings == []


def test_a_framework_base_is_followed_across_files(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "base.py": """
        import lightning as L
        class Base(L.LightningModule):
            pass
        """,
            "model.py": """
        from base import Base
        class Model(Base):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                for chunk in batch.split(2):
                    self.net(chunk).sum().backward()
                    opt.step()
        """,
            "plain.py": """
        class Plain:
            def fit(self, batch, opt):
                for chunk in batch.split(2):
                    self.net(chunk).sum().backward()
                    opt.step()
        """,
        },
    )
    found = [
        (Path(f.location.path).name, f.code)
        for f in lint(tmp_path, config=LintConfig(), select=["TD201"], jobs=1).findings
    ]
    assert found == [("plain.py", "TD201")]


@pytest.mark.slow
def test_worker_processes_see_the_same_project_as_one_process(tmp_path: Path) -> None:
    # 50 files (above the pool threshold): the index crosses to every worker.
    _write(
        tmp_path,
        {
            "model.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)
        """
        },
    )
    for number in range(50):
        (tmp_path / f"train_{number}.py").write_text(textwrap.dedent(_EVAL))
    serial = lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings
    pooled = lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=2).findings
    assert len(serial) == 50
    assert sorted(f.location.path or "" for f in pooled) == sorted(
        f.location.path or "" for f in serial
    )


@pytest.mark.parametrize(
    ("cpus", "files", "workers"),
    [(2, 5000, 1), (1, 5000, 1), (3, 5000, 3), (4, 47, 1), (4, 48, 4), (64, 5000, 8)],
)
def test_a_pool_is_used_only_where_it_pays(
    monkeypatch: pytest.MonkeyPatch, cpus: int, files: int, workers: int
) -> None:
    """A pool parses every file twice: one process on two CPUs or for few files."""
    monkeypatch.setattr(runner.os, "cpu_count", lambda: cpus)
    assert runner.default_workers(files) == workers


def test_a_factory_function_of_another_file_gives_its_class(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "nets.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.BatchNorm1d(4)
        def build_model():
            model = Net()
            return model
        def build_either(flag):
            if flag:
                return Net()
            return nn.Linear(2, 2)
        """,
            "train.py": """
        import torch
        from nets import build_model, build_either
        def evaluate(net, loader):
            with torch.no_grad():
                for x in loader:
                    net(x)
        def main(loader):
            evaluate(build_model(), loader)
        """,
        },
    )
    (tmp_path / "other.py").write_text(
        (tmp_path / "train.py")
        .read_text()
        .replace("evaluate(build_model(), loader)", "evaluate(build_either(True), loader)")
    )
    found = [
        (Path(f.location.path).name, f.location.line)
        for f in lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings
    ]
    assert found == [("train.py", 7)]  # build_either returns two kinds: not judged


def test_layers_collected_in_a_list_count_and_calls_on_self_do_not() -> None:
    project = index(
        nets="""
import torch.nn as nn
import torch.nn.functional as F

class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        layers = []
        for channels in (3, 8):
            layers.append(nn.Conv2d(channels, 8, 3))
            layers.append(nn.BatchNorm2d(8))
        self.body = nn.Sequential(*layers).to("cpu")

class Flagged(nn.Module):
    def forward(self, x):
        return self.mix(x, training=self.training)

class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return F.relu(self.fc(x))
"""
    )
    stack, flagged, plain = (
        project.module_class(f"nets.{n}") for n in ("Stack", "Flagged", "Plain")
    )
    assert stack is not None and stack.has_dropout_or_batchnorm is True
    assert flagged is not None and flagged.has_dropout_or_batchnorm is True
    assert plain is not None and plain.has_dropout_or_batchnorm is False


@pytest.mark.parametrize(
    "holder",
    [
        # the network built and put in eval() by a plain object's own method
        """
        class Scorer:
            def initialize(self):
                self.net = Net()
                self.net.eval()
        """,
        # built in the plain object's constructor, its mode set by code elsewhere
        """
        class Scorer:
            def __init__(self):
                self.net = Net()
        """,
    ],
)
def test_td501_quiet_for_layers_held_by_a_plain_object_of_the_module(
    tmp_path: Path, holder: str
) -> None:
    """A module whose layers live in a plain object (not a module): its own ``eval()``
    never reaches them and their mode is set where that object is; lint cannot prove the
    network runs in training mode."""
    _write(
        tmp_path,
        {
            "train.py": _EVAL,
            "model.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)
            def forward(self, x):
                return self.drop(x)
        """
            + textwrap.indent(textwrap.dedent(holder), " " * 8)
            + """
        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = Scorer()
            def forward(self, x):
                return self.model.net(x)
        """,
        },
    )
    (tmp_path / "train.py").write_text(
        (tmp_path / "train.py").read_text().replace("models.Net()", "models.Wrapper()")
    )
    assert lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings == []


def test_td501_still_flags_a_module_whose_layers_are_submodules(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "train.py": _EVAL.replace("models.Net()", "models.Wrapper()"),
            "model.py": """
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.5)
            def forward(self, x):
                return self.drop(x)
        class Wrapper(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = Net()
            def forward(self, x):
                return self.model(x)
        """,
        },
    )
    found = [
        (Path(f.location.path).name, f.location.line)
        for f in lint(tmp_path, config=LintConfig(), select=["TD501"], jobs=1).findings
    ]
    assert found == [("train.py", 8)]
