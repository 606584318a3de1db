"""Checkpoint against model (TD910), remapped copies that load strictly, and diffs."""

from __future__ import annotations

import pytest

from tests.unit.ckpt.conftest import Backbone, Encoder, digest
from torchdoctor.ckpt import diagnose
from torchdoctor.errors import UsageError
from torchdoctor.findings import Severity

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


def _td910(report):
    return report.by_code("TD910")


def test_matching_checkpoint_draws_no_finding_whatever_the_key_order(model, save) -> None:
    state = model.state_dict()
    shuffled = dict(reversed(list(state.items())))
    for path in (save(state, "a.pt"), save(shuffled, "b.pt")):
        report = diagnose(path, model=Encoder())
        assert not _td910(report)
        assert report.facts["comparison"]["loads_strict"]


def test_renamed_submodule_is_one_finding_with_the_mapping(save) -> None:
    report = diagnose(save(Backbone().state_dict()), model=Encoder())
    (hit,) = _td910(report)
    assert "'backbone.' -> 'encoder.'" in hit.message and "--write-remapped" in hit.fix_hint
    assert hit.location.object == "backbone.0.weight"


def test_shape_and_missing_key_problems_are_named(save) -> None:
    report = diagnose(save(Encoder(classes=10).state_dict()), model=Encoder(classes=3))
    weight, bias = sorted(_td910(report), key=lambda f: f.location.object, reverse=True)
    assert "'head.weight' has shape [10, 8]" in weight.message and "[3, 8]" in weight.message
    assert bias.location.object == "head.bias"

    class Deeper(Encoder):
        def __init__(self) -> None:
            super().__init__()
            self.extra = torch.nn.Linear(3, 3)

    missing = _td910(diagnose(save(Encoder().state_dict(), "e.pt"), model=Deeper()))
    assert len(missing) == 1 and "'extra.weight'" in missing[0].message
    assert missing[0].severity is Severity.ERROR


def test_dtype_difference_is_information_only(model, save) -> None:
    (hit,) = _td910(diagnose(save(model.half().state_dict()), model=Encoder()))
    assert hit.severity is Severity.INFO and "float16" in hit.message


def test_checkpoint_of_another_model_is_bad_input(save) -> None:
    other = torch.nn.Sequential(torch.nn.Conv2d(3, 5, 3), torch.nn.Conv2d(5, 7, 3))
    with pytest.raises(UsageError, match="is not a checkpoint of Encoder"):
        diagnose(save(other.state_dict()), model=Encoder())


@pytest.mark.parametrize("wrap", ["module.", "backbone"])
def test_remapped_copy_loads_strictly_and_the_source_is_untouched(save, tmp_path, wrap) -> None:
    if wrap == "backbone":
        state = Backbone().state_dict()
    else:
        state = {"module." + k: v for k, v in Encoder().state_dict().items()}
    source = save({"model": state, "epoch": 2, "optimizer": {"state": {}, "param_groups": []}})
    before, out = digest(source), tmp_path / "fixed.pt"
    report = diagnose(source, model=Encoder(), write_remapped=out)
    assert report.facts["remapped"] == str(out) and digest(source) == before
    written = torch.load(out, weights_only=True)
    Encoder().load_state_dict(written["model"], strict=True)
    assert written["epoch"] == 2, "the rest of the checkpoint is kept"
    assert not _td910(diagnose(out, model=Encoder()))


def test_remapped_safetensors_copy(save, tmp_path) -> None:
    pytest.importorskip("safetensors")
    out = tmp_path / "fixed.safetensors"
    diagnose(save(Backbone().state_dict()), model=Encoder(), write_remapped=out)
    from safetensors.torch import load_file

    Encoder().load_state_dict(load_file(str(out)), strict=True)


def test_remap_that_cannot_fit_writes_nothing(save, tmp_path) -> None:
    out = tmp_path / "out.pt"
    with pytest.raises(UsageError, match="nothing was written"):
        diagnose(save(Encoder(classes=10).state_dict()), model=Encoder(), write_remapped=out)
    assert list(tmp_path.iterdir()) == [tmp_path / "ckpt.pt"]


def test_remap_never_overwrites_its_source(save) -> None:
    source = save(Backbone().state_dict())
    before = digest(source)
    with pytest.raises(UsageError, match="never modifies"):
        diagnose(source, model=Encoder(), write_remapped=source)
    assert digest(source) == before


def test_diff_reports_keys_shapes_and_largest_differences(model, save) -> None:
    first = save({"model": model.state_dict(), "epoch": 1}, "first.pt")
    changed = {k: v.clone() for k, v in model.state_dict().items()}
    changed["head.bias"] += torch.tensor([0.0, 0.25, -0.5])
    changed["extra"] = torch.zeros(2)
    del changed["norm.num_batches_tracked"]
    second = save(changed, "second.pt")  # bare: aligned on the primary state_dicts
    diff = diagnose(first, diff=second).facts["diff"]
    rows = {row["key"]: row["max_abs_difference"] for row in diff["tensors"]}
    assert diff["aligned_on"] == "state_dict"
    assert rows["head.bias"] == pytest.approx(0.5) and rows["head.weight"] == 0.0
    assert diff["only_first"] == ["norm.num_batches_tracked"]
    assert diff["only_second"] == ["extra"] and not diff["identical"]


def test_diff_of_identical_files_is_identical(model, save) -> None:
    first, second = save(model.state_dict(), "a.pt"), save(model.state_dict(), "b.pt")
    assert diagnose(first, diff=second).facts["diff"]["identical"]
