"""Accuracy of the CPU memory forecast against the resident memory of the same steps.

For an MLP trained with AdamW and a CNN trained with SGD (momentum), each at two batch
sizes, this forecasts the peak of one training step (``check --forecast cpu``) and runs
the same steps for real in a fresh process: after torch is imported, the process's peak
resident size is reset (``/proc/self/clear_refs``), the model, optimizer and batch are
built and three training steps run (forward, loss, backward, ``optimizer.step()``,
``zero_grad(set_to_none=True)``); the growth of the peak resident size over the
resident size before building is the measured peak. It prints forecast / measured for
each case; the aim is within 15% (ratios between 0.85 and 1.15). Linux only. Run with
``python benchmarks/bench_forecast.py``.

Two measurements per case: *cold*, the process as a training script starts it (the
first steps also page in torch's kernels and their caches, which the forecast does not
count), and *warm*, after two steps of the same model at batch size 2 were run and freed
(what is left is the step's own memory, plus what the allocator keeps).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

CASES = (("mlp-adamw", 64), ("mlp-adamw", 512), ("cnn-sgd", 16), ("cnn-sgd", 64))
STEPS = 3


def build(kind: str, batch: int) -> tuple[Any, Any, Any, Any]:
    """The model, batch, loss and optimizer of one case (seeded)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if kind == "mlp-adamw":
        model = nn.Sequential(
            nn.Linear(1024, 2048),
            nn.ReLU(),
            nn.Linear(2048, 2048),
            nn.ReLU(),
            nn.Linear(2048, 2048),
            nn.ReLU(),
            nn.Linear(2048, 100),
        )
        data = (torch.randn(batch, 1024), torch.randint(0, 100, (batch,)))
        optimizer: Any = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.Conv2d(64, 128, 3, padding=1, stride=2),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.Conv2d(128, 256, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(256, 10),
        )
        data = (torch.randn(batch, 3, 64, 64), torch.randint(0, 10, (batch,)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, data, nn.CrossEntropyLoss(), optimizer


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(kind: str, batch: int, warm: bool = False) -> int:
    """Run in a fresh process: the growth of the peak resident size over the steps."""
    import torch

    torch.set_num_threads(1)
    if warm:
        model, (x, y), loss_fn, optimizer = build(kind, 2)
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(x), y).backward()
            optimizer.step()
        del model, x, y, loss_fn, optimizer
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset VmHWM, the peak resident size, to the current size
    before = _status("VmRSS")
    model, (x, y), loss_fn, optimizer = build(kind, batch)
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
    return _status("VmHWM") - before


def forecast(kind: str, batch: int) -> int:
    """The forecast peak of one step of the same case."""
    import torchdoctor
    from torchdoctor.preflight.forecast import ForecastOptions

    model, data, loss_fn, optimizer = build(kind, batch)
    report = torchdoctor.check(
        model,
        data,
        loss_fn,
        optimizer,
        select=["TD712"],
        forecast=ForecastOptions("cpu", (batch,), remedies=False),
    )
    (point,) = report.facts["forecast"]
    return int(point["peak_bytes"])


def _fresh(call: str) -> int:
    code = (
        f"import json, sys; sys.path.insert(0, {sys.path[0]!r}); import bench_forecast as b; "
        f"print(json.dumps(b.{call}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    print(
        f"{'case':<10} {'batch':>5} {'forecast':>9} "
        f"{'cold':>9} {'ratio':>6} {'warm':>9} {'ratio':>6}"
    )
    worst = {"cold": 0.0, "warm": 0.0}
    for kind, batch in CASES:
        predicted = _fresh(f"forecast({kind!r}, {batch})")
        cells = []
        for label, warm in (("cold", False), ("warm", True)):
            measured = _fresh(f"measure({kind!r}, {batch}, {warm})")
            worst[label] = max(worst[label], abs(predicted / measured - 1))
            cells.append(f"{measured / 2**20:>7.1f}Mi {predicted / measured:>6.3f}")
        print(f"{kind:<10} {batch:>5} {predicted / 2**20:>7.1f}Mi " + " ".join(cells))
    print(f"largest error: cold {worst['cold']:.1%}, warm {worst['warm']:.1%} (aim: within 15%)")


if __name__ == "__main__":
    main()
