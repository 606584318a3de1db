"""--model SPEC: building the model to compare with from a module or a file."""

from __future__ import annotations

import sys
import textwrap

import pytest

from torchdoctor.ckpt import load_model
from torchdoctor.errors import UsageError, UserCodeError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch

FACTORIES = textwrap.dedent(
    """
    import torch

    def model():
        return torch.nn.Linear(2, 3)

    def check_tuple():
        model = torch.nn.Linear(2, 3)
        return model, torch.ones(1, 2), torch.nn.MSELoss()

    def check_dict():
        return {"model": torch.nn.Linear(2, 3), "batch": torch.ones(1, 2)}

    def broken():
        raise ValueError("no such config")

    def not_a_model():
        return 42
    """
)


@pytest.fixture
def factory_file(tmp_path, monkeypatch):
    path = tmp_path / "factories_for_ckpt.py"
    path.write_text(FACTORIES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield path
    sys.modules.pop("factories_for_ckpt", None)


@pytest.mark.parametrize("name", ["model", "check_tuple", "check_dict"])
def test_file_and_module_specs_give_the_model(factory_file, name) -> None:
    for spec in (f"{factory_file}:{name}", f"factories_for_ckpt:{name}"):
        built = load_model(spec)
        assert isinstance(built, torch.nn.Linear) and built.out_features == 3


@pytest.mark.parametrize(
    "spec, error, message",
    [
        ("no_colon_here", UsageError, "expected 'package.module:factory'"),
        ("factories_for_ckpt:missing", UsageError, "has no callable 'missing'"),
        ("no_such_module_xyz:model", UsageError, "no module named"),
        ("missing_dir/file.py:model", UsageError, "no such file"),
        ("factories_for_ckpt:broken", UserCodeError, "ValueError: no such config"),
        ("factories_for_ckpt:not_a_model", UsageError, "returned int"),
    ],
)
def test_bad_specs_and_failing_factories_are_clear(factory_file, spec, error, message) -> None:
    with pytest.raises(error, match=message):
        load_model(spec)
