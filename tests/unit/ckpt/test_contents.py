"""Describing a checkpoint: its kind, state_dicts, training state, devices and values."""

from __future__ import annotations

import pytest

from tests.unit.ckpt.simulate import saved_on_cuda
from torchdoctor.ckpt import inspect_checkpoint, values

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.needs_torch


def _training_state(model):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for parameter in model.parameters():
        parameter.grad = torch.ones_like(parameter)
    optimizer.step()
    return optimizer


def test_bare_state_dict(save, model) -> None:
    contents = inspect_checkpoint(save(model.state_dict()))
    assert contents.kind == "state_dict" and contents.primary.path == ""
    assert [t.key for t in contents.primary.tensors] == list(model.state_dict())
    head = contents.primary.by_key()["head.weight"]
    assert (head.shape, head.dtype, head.saved_from) == ((3, 8), "float32", "cpu")


def test_training_checkpoint_finds_model_optimizer_scheduler_and_counter(save, model) -> None:
    optimizer = _training_state(model)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    contents = inspect_checkpoint(
        save(
            {
                "epoch": 4,
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            }
        )
    )
    assert contents.kind == "training"
    assert contents.primary.path == "model"
    assert len(contents.state_dicts) == 1, "Adam's per-parameter state is not a model"
    assert contents.optimizer_paths == ("optimizer",)
    assert contents.scheduler_paths == ("scheduler",)
    assert contents.counters == (("epoch", "4"),)
    assert contents.scheduler_used
    assert "optimizer/state/0/exp_avg" in {t.key for t in contents.tensors}


def test_preferred_model_entry_wins_over_a_larger_state_dict(save, model) -> None:
    big = {f"table.{i}": torch.zeros(2) for i in range(30)}
    contents = inspect_checkpoint(save({"ema": big, "model": model.state_dict()}))
    assert contents.kind == "weights"
    assert [s.path for s in contents.state_dicts] == ["model", "ema"]


def test_optimizer_without_scheduler_does_not_claim_one(save, model) -> None:
    optimizer = _training_state(model)
    contents = inspect_checkpoint(
        save({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    )
    assert not contents.scheduler_used and contents.counters == ()


def test_non_finite_values_are_counted_per_tensor(save) -> None:
    weight = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    contents = inspect_checkpoint(
        save({"w": weight, "ok": torch.ones(3), "steps": torch.tensor([1, 2])})
    )
    found = contents.primary.by_key()
    assert (found["w"].nan, found["w"].inf) == (1, 2)
    assert (found["ok"].nan, found["ok"].inf) == (0, 0)


def test_chunked_scans_agree_with_whole_tensor_results(monkeypatch) -> None:
    monkeypatch.setattr(values, "CHUNK_ELEMENTS", 7)
    data = torch.randn(100, dtype=torch.float64)
    data[[3, 50]] = float("nan")
    data[99] = float("inf")
    assert values.count_non_finite(data) == (2, 1)
    other = data.clone()
    other[10] += 0.5
    assert values.max_abs_difference(data, other) == pytest.approx(0.5)
    assert values.max_abs_difference(data, data.clone()) == 0.0
    other[3] = 1.0  # NaN in only one of the two
    assert values.max_abs_difference(data, other) != values.max_abs_difference(data, other)


def test_device_recorded_by_a_gpu_save_is_reported_per_tensor(save, model) -> None:
    with saved_on_cuda():
        path = save({"model": model.state_dict(), "cpu_copy": model.head.weight.cpu()})
    by_key = {t.key: t.saved_from for t in inspect_checkpoint(path).tensors}
    assert by_key["model/head.weight"] == "cuda:0"
    assert by_key["cpu_copy"] == "cpu"
