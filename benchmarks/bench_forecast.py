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

What is measured, per case, each in a fresh process:

- *allocator*: the CPU allocator's own peak of the same step (its second), from
  ``torch.profiler``'s memory events, plus the bytes alive when it starts: what the
  forecast predicts (tensors and the memory kernels take inside ops).
- *warm*: the resident peak's growth, after two steps of the same model at batch size 2
  were run and freed (torch's kernels are paged in; what is left is the step's memory
  plus what the C allocator keeps of it).
- *warm, fixed mmap threshold*: the same with ``MALLOC_MMAP_THRESHOLD_=131072``, which
  stops glibc from raising its threshold as blocks are freed, so blocks of 128 KiB and
  more are returned to the system when freed: the resident size the step's allocations
  themselves need, without the heap's retention (a diagnostic, not a setting to train
  with).
- *cold*: the resident peak's growth as a training script starts (the first steps also
  page in torch's kernels and oneDNN's generated code, which no forecast of the step
  counts).
"""

from __future__ import annotations

import json
import os
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


def allocator_peak(kind: str, batch: int) -> int:
    """Run in a fresh process: the CPU allocator's peak of the second step."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(1)
    model, (x, y), loss_fn, optimizer = build(kind, batch)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    step()
    optimizer.zero_grad(set_to_none=True)
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v)]
    tensors = [*model.parameters(), *model.buffers(), x, y, *state]
    start = sum(
        {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values()
    )
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(
        (e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
        key=lambda e: e.start_ns(),
    )
    running = highest = 0
    for event in events:
        running += event.nbytes()
        highest = max(highest, running)
    return start + highest


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


def _fresh(call: str, env: dict[str, str] | None = None) -> int:
    code = (
        f"import json, sys; sys.path.insert(0, {sys.path[0]!r}); import bench_forecast as b; "
        f"print(json.dumps(b.{call}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    return int(json.loads(done.stdout.strip().splitlines()[-1]))


_FIXED_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": "131072"}
COLUMNS = (
    ("allocator", "allocator_peak({kind!r}, {batch})", None),
    ("warm", "measure({kind!r}, {batch}, True)", None),
    ("warm-fixed", "measure({kind!r}, {batch}, True)", _FIXED_THRESHOLD),
    ("cold", "measure({kind!r}, {batch}, False)", None),
)


def main() -> None:
    print(
        f"{'case':<10} {'batch':>5} {'forecast':>9} "
        + " ".join(f"{label:>10} {'ratio':>6}" for label, _, _ in COLUMNS)
    )
    worst = dict.fromkeys((label for label, _, _ in COLUMNS), 0.0)
    for kind, batch in CASES:
        predicted = _fresh(f"forecast({kind!r}, {batch})")
        cells = []
        for label, call, env in COLUMNS:
            measured = _fresh(call.format(kind=kind, batch=batch), env)
            worst[label] = max(worst[label], abs(predicted / measured - 1))
            cells.append(f"{measured / 2**20:>8.1f}Mi {predicted / measured:>6.3f}")
        print(f"{kind:<10} {batch:>5} {predicted / 2**20:>7.1f}Mi " + " ".join(cells))
    print(
        "largest error (forecast / measured - 1): "
        + ", ".join(f"{label} {error:.1%}" for label, error in worst.items())
        + " (aim for the resident peak: within 15%)"
    )


if __name__ == "__main__":
    main()
