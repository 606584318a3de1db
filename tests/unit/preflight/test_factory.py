"""Loading ``module:factory`` targets and normalising what factories return."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from torchdoctor.errors import UsageError, UserCodeError  # noqa: E402
from torchdoctor.preflight.factory import CheckTarget, check_factory, load_factory  # noqa: E402

pytestmark = pytest.mark.needs_torch

GOOD = """
import torch
from torch import nn

def make():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    return model, (torch.randn(8, 4), torch.randint(0, 3, (8,))), nn.CrossEntropyLoss()

def as_dict():
    model, data, loss = make()
    return {"model": model, "data": data, "loss_fn": loss, "device": "cpu"}

def raises():
    raise ValueError("the dataset path does not exist")

def wrong():
    return 42

NOT_A_FUNCTION = 3
"""


@pytest.fixture
def target_file(tmp_path):
    path = tmp_path / "train_setup.py"
    path.write_text(textwrap.dedent(GOOD))
    return path


def test_path_target_defaults_to_make(target_file) -> None:
    factory, label = load_factory(str(target_file))
    assert label.endswith("train_setup.py:make") and callable(factory)


def test_module_target_is_imported_from_the_working_directory(target_file, monkeypatch) -> None:
    monkeypatch.chdir(target_file.parent)
    monkeypatch.setattr(sys, "path", list(sys.path))
    report = check_factory("train_setup:as_dict", select=["TD1"])
    assert report.facts["target"] == "train_setup:as_dict"


def test_factory_that_raises_names_the_users_line(target_file) -> None:
    with pytest.raises(UserCodeError) as caught:
        check_factory(f"{target_file}:raises")
    assert "ValueError: the dataset path does not exist" in str(caught.value)
    line = (
        textwrap.dedent(GOOD)
        .splitlines()
        .index('    raise ValueError("the dataset path does not exist")')
        + 1
    )
    assert caught.value.where.endswith(f"train_setup.py:{line}")


@pytest.mark.parametrize(
    "suffix, message",
    [
        (":missing", "has no attribute 'missing'"),
        (":NOT_A_FUNCTION", "not a function"),
        (":wrong", "returned a int"),
    ],
)
def test_bad_factories_are_usage_errors(target_file, suffix, message) -> None:
    with pytest.raises(UsageError, match=message):
        check_factory(f"{target_file}{suffix}")


def test_missing_file_and_module_are_usage_errors(tmp_path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        load_factory(str(tmp_path / "nope.py"))
    with pytest.raises(UsageError, match="cannot find module 'no_such_module_xyz'"):
        load_factory("no_such_module_xyz:make")


def test_import_error_inside_the_users_module_is_user_code(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken_setup.py").write_text("import not_installed_package_xyz\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(UserCodeError, match="not_installed_package_xyz"):
        load_factory("broken_setup:make")


def test_result_shapes() -> None:
    model = torch.nn.Linear(1, 1)
    assert CheckTarget.from_result((model, "d", "l")).optimizer is None
    assert CheckTarget.from_result([model, "d", "l", "o"]).optimizer == "o"
    with pytest.raises(UsageError, match="unknown keys \\['lr'\\]"):
        CheckTarget.from_result({"model": model, "data": 1, "loss_fn": 2, "lr": 3})
    with pytest.raises(UsageError, match="missing keys \\['data'\\]"):
        CheckTarget.from_result({"model": model, "loss_fn": 2})
    # a step computes the loss, so a dict without loss_fn is whole
    assert CheckTarget.from_result({"model": model, "data": 1, "step": len}).loss_fn is None
    with pytest.raises(UsageError, match="a tuple of 2 items"):
        CheckTarget.from_result((model, 1))


# --- the one importer: `torchdoctor ckpt --model` uses it too ----------------------------------


def test_ckpt_model_option_imports_through_this_loader(target_file, monkeypatch) -> None:
    from torchdoctor import _usercode
    from torchdoctor.ckpt import load_model
    from torchdoctor.preflight import factory

    assert factory.load_factory is _usercode.load_factory  # one loader, in the user-code layer
    loaded: list[str] = []

    def spy(target: str):
        loaded.append(target)
        return load_factory(target)

    monkeypatch.setattr(_usercode, "load_factory", spy)
    assert isinstance(load_model(f"{target_file}:make"), torch.nn.Linear)
    assert loaded == [f"{target_file}:make"]


def test_ckpt_words_a_missing_submodule_as_a_missing_module(tmp_path, monkeypatch) -> None:
    """A package that exists without the named submodule is the user's typo, not their
    code failing: both commands say the module is missing."""
    from torchdoctor.ckpt import load_model

    (tmp_path / "models_pkg").mkdir()
    (tmp_path / "models_pkg" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(UsageError, match="--model: no module named 'models_pkg.nets'"):
        load_model("models_pkg.nets:make")
    with pytest.raises(UsageError, match="cannot find module 'models_pkg.nets'"):
        load_factory("models_pkg.nets:make")
