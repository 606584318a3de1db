"""``check`` leaves the user's model, optimizer and process as it found them.

Measured here without :class:`~torchdoctor.preflight.snapshot.Snapshot` (whose own tests
use it to compare), so a state the snapshot forgets to save shows up: the state dict,
modes, ``requires_grad``, ``.grad``, plain attributes, every hook registry, the optimizer's
state dict and attributes, the RNGs, the thread count and torch's global modes and flags.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")
numpy = pytest.importorskip("numpy")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import torchdoctor  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _no_op_hook(*args: Any, **kwargs: Any) -> None:
    return None


class Classifier(nn.Module):
    """BatchNorm, dropout, a frozen stem, a submodule left in eval mode, and hooks of
    every kind registered by the user."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Linear(8, 16)
        self.body = nn.Sequential(nn.Linear(16, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Linear(16, 4)
        self.stem.requires_grad_(False)
        self.scale = 1.0

    def forward(self, x):
        return self.head(self.body(self.stem(x))) * self.scale


def _setup() -> tuple[nn.Module, DataLoader, nn.Module, Any]:
    model = Classifier()
    model.body[1].eval()  # a mixed set of modes
    model.head.register_forward_hook(_no_op_hook)
    model.body.register_forward_pre_hook(_no_op_hook)
    model.head.register_full_backward_hook(_no_op_hook)
    model.head.weight.register_hook(_no_op_hook)
    model.head.bias.register_post_accumulate_grad_hook(_no_op_hook)
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(
        torch.randn(64, 8, generator=generator), torch.randint(0, 4, (64,), generator=generator)
    )
    loader = DataLoader(data, batch_size=16, shuffle=True)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    optimizer.register_step_post_hook(_no_op_hook)
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=5)
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = next(iter(loader))
    loss_fn(model(inputs), targets).backward()  # mid-training: state and .grad present
    optimizer.step()
    loss_fn(model(inputs), targets).backward()
    return model, loader, loss_fn, optimizer


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {key: _clone(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(item) for item in value)
    return value


def _same(first: Any, second: Any) -> bool:
    if isinstance(first, torch.Tensor):
        return isinstance(second, torch.Tensor) and torch.equal(first, second)
    if isinstance(first, dict):
        return first.keys() == second.keys() and all(_same(first[k], second[k]) for k in first)
    if isinstance(first, (list, tuple)):
        return len(first) == len(second) and all(map(_same, first, second))
    return bool(first == second)


def _hook_registries(model: nn.Module, optimizer: Any) -> dict[str, dict[Any, Any]]:
    import torch.nn.modules.module as module_globals
    import torch.optim.optimizer as optimizer_globals

    found = {
        f"{name}.{key}": dict(value)
        for name, module in model.named_modules()
        for key, value in vars(module).items()
        if "hook" in key and isinstance(value, dict)
    }
    found.update(
        {
            f"{name}.{key}": dict(getattr(param, key) or {})
            for name, param in model.named_parameters()
            for key in ("_backward_hooks", "_post_accumulate_grad_hooks")
        }
    )
    found.update(
        {
            f"optimizer.{key}": dict(value)
            for key, value in vars(optimizer).items()
            if "hook" in key and isinstance(value, dict)
        }
    )
    for source in (module_globals, optimizer_globals):
        found.update(
            {
                key: dict(value)
                for key, value in vars(source).items()
                if key.startswith("_global_") and isinstance(value, dict)
            }
        )
    return found


def _process_state() -> dict[str, Any]:
    return {
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": numpy.random.get_state()[1].tolist(),
        "random_rng": random.getstate(),
        "threads": torch.get_num_threads(),
        "grad_enabled": torch.is_grad_enabled(),
        "anomaly": torch.is_anomaly_enabled(),
        "anomaly_check_nan": torch.is_anomaly_check_nan_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "cudnn": (
            torch.backends.cudnn.enabled,
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
        ),
        "mkldnn": torch.backends.mkldnn.enabled,
    }


def _state(model: nn.Module, loss_fn: nn.Module, optimizer: Any) -> dict[str, Any]:
    return {
        "state_dict": _clone(model.state_dict(keep_vars=False)),
        "tensor_objects": [id(t) for t in (*model.parameters(), *model.buffers())],
        "training": {name: m.training for name, m in model.named_modules()},
        "requires_grad": {name: p.requires_grad for name, p in model.named_parameters()},
        "grads": {name: (id(p.grad), _clone(p.grad)) for name, p in model.named_parameters()},
        "attributes": {name: sorted(vars(m)) for name, m in model.named_modules()},
        "scale": model.scale,
        "loss_fn": (loss_fn.training, sorted(vars(loss_fn))),
        "hooks": _hook_registries(model, optimizer),
        "optimizer": _clone(optimizer.state_dict()),
        "optimizer_attributes": sorted(vars(optimizer)),
        "optimizer_step": optimizer.step,
        **_process_state(),
    }


@contextlib.contextmanager
def _unusual_settings() -> Iterator[None]:
    """Settings a user may run with that the check must neither need nor change."""
    saved = torch.get_num_threads(), torch.backends.cudnn.benchmark
    torch.set_num_threads(1)
    torch.backends.cudnn.benchmark = True
    try:
        with torch.no_grad(), torch.autograd.set_detect_anomaly(True, check_nan=False):
            yield
    finally:
        torch.set_num_threads(saved[0])
        torch.backends.cudnn.benchmark = saved[1]


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [contextlib.nullcontext, _unusual_settings],
    ids=["defaults", "no-grad-anomaly-one-thread"],
)
def test_a_full_check_leaves_everything_as_it_found_it(settings) -> None:
    model, loader, loss_fn, optimizer = _setup()
    with settings():
        torch.manual_seed(123)
        numpy.random.seed(123)
        random.seed(123)
        before = _state(model, loss_fn, optimizer)
        report = torchdoctor.check(model, loader, loss_fn, optimizer)
        after = _state(model, loss_fn, optimizer)
    assert not report.by_code("TD001"), [f.message for f in report.by_code("TD001")]
    changed = sorted(key for key in before if not _same(before[key], after[key]))
    assert changed == [], {key: (before[key], after[key]) for key in changed}


def _sloppy(ctx, out) -> None:
    """A probe that changes everything it can reach and cleans up nothing."""
    import torch.nn.modules.module as module_globals

    model, optimizer = ctx.model, ctx.optimizer
    model.head.register_forward_hook(_no_op_hook)
    model.body.register_full_backward_pre_hook(_no_op_hook)
    model.head.weight.register_hook(_no_op_hook)
    model.body[0].weight.register_post_accumulate_grad_hook(_no_op_hook)
    module_globals.register_module_forward_hook(_no_op_hook)
    optimizer.register_step_pre_hook(_no_op_hook)
    model.scale, model.probe_note = 2.0, "left behind"
    model.eval()
    model.head.weight.requires_grad_(False)
    with torch.no_grad():
        model.head.bias.add_(1.0)
    optimizer.param_groups[0]["lr"] = 0.5
    torch.rand(3)
    numpy.random.rand(3)
    random.random()
    torch.set_grad_enabled(False)
    torch.set_anomaly_enabled(True, False)
    torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
    torch.set_num_threads(3)
    if ctx.seed == 1:
        raise RuntimeError("a probe's bug, half-way")


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
def test_a_probe_that_changes_everything_leaves_nothing_behind(fails) -> None:
    from torchdoctor.preflight.context import CheckContext
    from torchdoctor.preflight.engine import run_probes
    from torchdoctor.preflight.registry import ProbeInfo

    model, loader, loss_fn, optimizer = _setup()
    before = _state(model, loss_fn, optimizer)
    ctx = CheckContext(model, loader, loss_fn, optimizer, seed=int(fails))
    report = run_probes(ctx, [ProbeInfo(("TD605",), _sloppy)])
    after = _state(model, loss_fn, optimizer)
    assert bool(report.by_code("TD001")) is fails
    changed = sorted(key for key in before if not _same(before[key], after[key]))
    assert changed == [], {key: (before[key], after[key]) for key in changed}
