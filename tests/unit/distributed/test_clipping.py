"""TD814 at run depth, in one process: watching torch's clip_grad_norm_ changes nothing."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import torchdoctor

pytestmark = pytest.mark.needs_torch


def _model_with_grads() -> Any:
    import torch
    from torch import nn

    torch.manual_seed(0)  # the same model and gradients every time
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    model(torch.randn(5, 6)).pow(2).sum().backward()
    return model


def test_every_spelling_clips_as_torch_does_and_nothing_is_reported() -> None:
    import torch

    expected_model = _model_with_grads()
    original = torch.nn.utils.clip_grad_norm_
    expected = original(expected_model.parameters(), 0.1)
    with torchdoctor.watch() as watched:
        assert torch.nn.utils.clip_grad_norm_ is not original  # watched
        for call in (
            lambda m: torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1),
            lambda m: torch.nn.utils.clip_grad_norm_(parameters=m.parameters(), max_norm=0.1),
            lambda m: torch.nn.utils.clip_grad.clip_grad_norm_(list(m.parameters()), 0.1),
        ):
            model = _model_with_grads()
            assert float(call(model)) == pytest.approx(float(expected))
            for ours, theirs in zip(
                model.parameters(),
                expected_model.parameters(),
                strict=True,  # type: ignore[attr-defined]
            ):
                assert torch.equal(ours.grad, theirs.grad)
        single = _model_with_grads()
        weight = next(single.parameters())
        torch.nn.utils.clip_grad_norm_(weight, 0.1)  # a lone tensor
        assert float(weight.grad.norm()) == pytest.approx(0.1, rel=1e-4)
    assert torch.nn.utils.clip_grad_norm_ is original  # restored
    assert "TD814" not in watched.report.codes()


def iter_nothing() -> Any:
    yield from ()


def test_torch_still_warns_about_an_empty_generator_and_errors_stay_torchs() -> None:
    import torch

    with torchdoctor.watch():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.nn.utils.clip_grad_norm_(iter_nothing(), 1.0)
        assert any("empty generator" in str(w.message) for w in caught)
        with pytest.raises(TypeError):
            torch.nn.utils.clip_grad_norm_()  # type: ignore[call-arg]


def test_the_deprecated_alias_warns_at_the_callers_line_and_still_clips() -> None:
    import torch

    expected = torch.nn.utils.clip_grad_norm_(_model_with_grads().parameters(), 0.1)
    model = _model_with_grads()
    with torchdoctor.watch(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        norm = torch.nn.utils.clip_grad_norm(model.parameters(), 0.1)
    deprecations = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert deprecations and all(w.filename == __file__ for w in deprecations)
    assert float(norm) == pytest.approx(float(expected))
    assert float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()) <= 0.1001


def test_fsdp1_in_a_group_of_one_is_quiet() -> None:
    """One rank holds every shard: torch's norm is the model's, so nothing to report."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with torchdoctor.watch() as watched:
            torch.manual_seed(0)
            model = FSDP(nn.Linear(4, 2), device_id=torch.device("cpu"))
            model(torch.randn(3, 4)).sum().backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            assert float(norm) == pytest.approx(float(model.clip_grad_norm_(1e9)))
    finally:
        dist.destroy_process_group()
    assert "TD814" not in watched.report.codes()
