"""Every ckpt detector: the problems it must report and the correct files it must not."""

from __future__ import annotations

import argparse

import pytest

from tests.unit.ckpt.conftest import Encoder
from tests.unit.ckpt.simulate import saved_on_cuda
from torchdoctor.ckpt import api, diagnose
from torchdoctor.findings import Confidence
from torchdoctor.rules.detectors import DetectorInfo

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


def _optimizer(model, scheduled: bool = False):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if scheduled:
        torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    return optimizer


def _prefixed(model, prefix):
    return {prefix + key: value for key, value in model.state_dict().items()}


class Wrapper(torch.nn.Module):
    """A model whose own keys start with 'module.' (an attribute named module)."""

    def __init__(self) -> None:
        super().__init__()
        self.module = Encoder()


# (name, builder(model, save) -> path, code). Builders for negatives return files that
# must draw no finding of the code.
POSITIVE = {
    "TD805 ddp keys": (lambda m, s: s(_prefixed(m, "module.")), "TD805"),
    "TD909 compiled keys": (lambda m, s: s(_prefixed(m, "_orig_mod.")), "TD909"),
    "TD902 namespace": (
        lambda m, s: s({"model": m.state_dict(), "args": argparse.Namespace(lr=1)}),
        "TD902",
    ),
    "TD903 whole module": (lambda m, s: s(m), "TD903"),
    "TD905 no optimizer": (lambda m, s: s({"model": m.state_dict(), "epoch": 3}), "TD905"),
    "TD905 no scheduler": (
        lambda m, s: s(
            {"model": m.state_dict(), "epoch": 3, "optimizer": _optimizer(m, True).state_dict()}
        ),
        "TD905",
    ),
    "TD911 nan weight": (
        lambda m, s: s({**m.state_dict(), "head.bias": torch.tensor([0.0, float("nan"), 1.0])}),
        "TD911",
    ),
    "TD102 float64": (lambda m, s: s(m.double().state_dict()), "TD102"),
}
NEGATIVE = {
    "TD805 plain keys": (lambda m, s: s(m.state_dict()), "TD805"),
    "TD805 one submodule named module": (
        lambda m, s: s({**m.state_dict(), "module.scale": torch.ones(1)}),
        "TD805",
    ),
    "TD909 plain keys": (lambda m, s: s(m.state_dict()), "TD909"),
    "TD909 lookalike segment": (lambda m, s: s({"my_orig_mod.weight": torch.ones(2)}), "TD909"),
    "TD902 plain training dict": (
        lambda m, s: s(
            {
                "model": m.state_dict(),
                "args": {"lr": 1},
                "epoch": 1,
                "optimizer": _optimizer(m).state_dict(),
            }
        ),
        "TD902",
    ),
    "TD903 namespace is not a module": (lambda m, s: s({"args": argparse.Namespace()}), "TD903"),
    "TD905 bare weights": (lambda m, s: s(m.state_dict()), "TD905"),
    "TD905 weights with config": (
        lambda m, s: s({"model": m.state_dict(), "config": {"width": 8}}),
        "TD905",
    ),
    "TD905 complete without scheduler": (
        lambda m, s: s(
            {"model": m.state_dict(), "step": 9, "optimizer": _optimizer(m).state_dict()}
        ),
        "TD905",
    ),
    "TD911 large but finite": (lambda m, s: s({"w": torch.full((4,), 3e38)}), "TD911"),
    "TD102 float32": (lambda m, s: s(m.state_dict()), "TD102"),
    "TD102 float64 scalar and lone tensor": (
        lambda m, s: s(
            {
                "model": {**m.state_dict(), "temperature": torch.tensor(0.5, dtype=torch.float64)},
                "history": torch.zeros(100, dtype=torch.float64),
            }
        ),
        "TD102",
    ),
}


@pytest.mark.parametrize("build, code", POSITIVE.values(), ids=POSITIVE.keys())
def test_reports_the_problem(build, code, model, save) -> None:
    report = diagnose(build(model, save))
    assert code in report.codes(), [f.message for f in report]
    hit = report.by_code(code)[0]
    assert hit.location.path and hit.fix_hint


@pytest.mark.parametrize("build, code", NEGATIVE.values(), ids=NEGATIVE.keys())
def test_stays_quiet_on_correct_files(build, code, model, save) -> None:
    report = diagnose(build(model, save))
    assert code not in report.codes(), [f.message for f in report]


def test_namespace_is_refused_but_not_called_a_module(model, save) -> None:
    report = diagnose(save({"model": model.state_dict(), "args": argparse.Namespace()}))
    assert report.codes() == {"TD902"}
    assert "argparse.Namespace" in report.by_code("TD902")[0].message


def test_trusted_load_still_reports_the_unsafe_file(model, save) -> None:
    report = diagnose(save(model), trust=True)
    assert {"TD902", "TD903"} <= report.codes()
    assert "--trust was given" in report.by_code("TD902")[0].message
    assert report.facts["checkpoint"]["tensor_count"] == len(model.state_dict())


def test_cuda_saved_tensors_need_map_location_and_cpu_copies_do_not(model, save) -> None:
    with saved_on_cuda():
        gpu = save(model.state_dict(), "gpu.pt")
        portable = save({k: v.cpu() for k, v in model.state_dict().items()}, "cpu.pt")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # the symptom a user would hit
            torch.load(gpu, weights_only=True)
    hit = diagnose(gpu).by_code("TD901")
    assert hit and "cuda:0" in hit[0].message and hit[0].location.object == "encoder.0.weight"
    assert not diagnose(portable).by_code("TD901")
    assert not diagnose(save(model.state_dict(), "plain.pt")).by_code("TD901")


def test_prefix_confidence_rises_when_the_model_lacks_it(model, save) -> None:
    path = save(_prefixed(model, "module."))
    assert diagnose(path).by_code("TD805")[0].confidence is Confidence.MEDIUM
    assert diagnose(path, model=model).by_code("TD805")[0].confidence is Confidence.HIGH


def test_prefixes_the_model_itself_has_are_not_reported(save) -> None:
    wrapper = Wrapper()
    assert not diagnose(save(wrapper.state_dict()), model=wrapper).by_code("TD805")
    compiled_keys = {"_orig_mod." + k: v for k, v in Encoder().state_dict().items()}

    class Compiled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self._orig_mod = Encoder()

    assert not diagnose(save(compiled_keys, "c.pt"), model=Compiled()).by_code("TD909")


def test_a_failing_detector_becomes_one_internal_error(model, save, monkeypatch) -> None:
    def broken(context):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(
        api, "registered_detectors", lambda depth: [DetectorInfo(("TD911",), depth, broken)]
    )
    report = diagnose(save(model.state_dict()))
    assert report.codes() == {"TD001"} and report.exit_code() == 2
    assert "broken" in report.by_code("TD001")[0].message
