"""Step time of a Lightning and a Hugging Face training with and without DoctorCallback.

Each framework trains the same MLP classifier (``--width`` wide, batch ``--batch``) for
``--steps`` optimizer steps per fit, in ``--rounds`` interleaved pairs (without, with), so
a slow patch of a shared machine hits both sides alike. A step's time is the gap between
the framework's end-of-step events in CPU time of this process, with one torch thread (on
a busy shared machine wall time swings far more than CPU time); the steady state is the
median gap after the first ``--warmup`` steps (the monitor samples densely at first, then
cheaply). Printed per framework: the median step without and with the callback, their
ratio (the aim is at most 1.03), and the ratio of whole fits in wall time. Run with
``python benchmarks/bench_integrations.py`` (``--only lightning`` or ``--only
transformers`` for one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset, TensorDataset  # noqa: E402


def _mlp(width: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)
    )


def _data(count: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randn(count, width, generator=generator),
        torch.randint(0, 10, (count,), generator=generator),
    )


def lightning_fit(args: argparse.Namespace, with_doctor: bool) -> tuple[list[float], float]:
    """One Lightning fit; returns the step gaps and the fit's wall time."""
    import lightning.pytorch as pl

    from torchdoctor.integrations.lightning import DoctorCallback

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp(args.width)

        def training_step(self, batch: Any, index: int) -> Any:
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    class Gaps(pl.Callback):
        def __init__(self) -> None:
            self.stamps: list[float] = []

        def on_train_batch_end(self, *unused: Any) -> None:
            self.stamps.append(time.process_time())

    gaps = Gaps()
    callbacks: list[Any] = [gaps] + ([DoctorCallback(print_report=False)] if with_doctor else [])
    x, y = _data(args.batch * args.steps, args.width)
    with tempfile.TemporaryDirectory() as root:
        trainer = pl.Trainer(
            max_steps=args.steps,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=root,
            callbacks=callbacks,
        )
        torch.manual_seed(0)
        start = time.perf_counter()
        trainer.fit(Module(), DataLoader(TensorDataset(x, y), batch_size=args.batch))
        wall = time.perf_counter() - start
    return _gaps(gaps.stamps), wall


def transformers_fit(args: argparse.Namespace, with_doctor: bool) -> tuple[list[float], float]:
    """One Hugging Face Trainer run; returns the step gaps and the run's wall time."""
    import transformers

    from torchdoctor.integrations.transformers import DoctorCallback

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = _mlp(args.width)

        def forward(self, inputs: Any, labels: Any = None) -> dict[str, Any]:
            logits = self.net(inputs)
            return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}

    class Rows(Dataset):
        def __init__(self) -> None:
            self.x, self.y = _data(args.batch * args.steps, args.width)

        def __len__(self) -> int:
            return len(self.x)

        def __getitem__(self, index: int) -> dict[str, Any]:
            return {"inputs": self.x[index], "labels": self.y[index]}

    class Gaps(transformers.TrainerCallback):
        def __init__(self) -> None:
            self.stamps: list[float] = []

        def on_step_end(self, *unused: Any, **kwargs: Any) -> None:
            self.stamps.append(time.process_time())

    gaps = Gaps()
    callbacks: list[Any] = [gaps] + ([DoctorCallback(print_report=False)] if with_doctor else [])
    with tempfile.TemporaryDirectory() as root:
        training = transformers.TrainingArguments(
            output_dir=root,
            use_cpu=True,
            report_to=[],
            per_device_train_batch_size=args.batch,
            max_steps=args.steps,
            save_strategy="no",
            disable_tqdm=True,
            logging_strategy="no",
            seed=0,
            optim="adamw_torch",
        )
        torch.manual_seed(0)
        trainer = transformers.Trainer(
            model=Model(), args=training, train_dataset=Rows(), callbacks=callbacks
        )
        start = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - start
    return _gaps(gaps.stamps), wall


def _gaps(stamps: list[float]) -> list[float]:
    return [later - earlier for earlier, later in zip(stamps, stamps[1:], strict=False)]


def compare(
    name: str,
    fit: Callable[[argparse.Namespace, bool], tuple[list[float], float]],
    args: argparse.Namespace,
) -> None:
    fit(args, False)  # warm-up: imports, allocator, thread pools
    plain: list[float] = []
    watched: list[float] = []
    walls: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for with_doctor, sink in ((False, plain), (True, watched)):
            gaps, wall = fit(args, with_doctor)
            sink.extend(gaps[args.warmup :])
            walls[with_doctor].append(wall)
    without, with_ = statistics.median(plain), statistics.median(watched)
    fit_ratio = statistics.median(walls[True]) / statistics.median(walls[False])
    print(
        f"{name:12s} step {without * 1e3:7.2f} ms CPU without, {with_ * 1e3:7.2f} ms with "
        f"DoctorCallback: ratio {with_ / without:.3f} (aim <= 1.03); whole fit ratio "
        f"{fit_ratio:.3f} ({args.rounds} interleaved rounds of {args.steps} steps)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--only", choices=("lightning", "transformers"), default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)  # a shared machine: one thread keeps the two sides comparable
    import logging

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    if args.only in (None, "lightning"):
        compare("Lightning", lightning_fit, args)
    if args.only in (None, "transformers"):
        compare("Transformers", transformers_fit, args)


if __name__ == "__main__":
    main()
