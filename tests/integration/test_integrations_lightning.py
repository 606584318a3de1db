"""DoctorCallback in a real Lightning Trainer: a buggy tiny training is flagged, the same
training fixed (with validation, gradient accumulation and bf16 autocast) is not."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")

from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.integrations.lightning import DoctorCallback, FindingsError  # noqa: E402


class Classifier(pl.LightningModule):
    """A small MLP classifier; ``head_only`` builds the optimizer from the head alone."""

    def __init__(self, head_only: bool = False) -> None:
        super().__init__()
        self.head_only = head_only
        self.body = nn.Sequential(
            nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 32), nn.ReLU()
        )
        self.head = nn.Linear(32, 3)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x: Any) -> Any:
        return self.head(self.body(x))

    def training_step(self, batch: Any, index: int) -> Any:
        x, y = batch
        loss = self.loss_fn(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, index: int) -> None:
        x, y = batch
        self.log("val_loss", self.loss_fn(self(x), y))

    def configure_optimizers(self) -> Any:
        params = self.head.parameters() if self.head_only else self.parameters()
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)


class MemoryLogger(pl.loggers.Logger):
    """Keeps what the trainer logs."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: list[tuple[dict[str, float], int | None]] = []

    @property
    def name(self) -> str:
        return "memory"

    @property
    def version(self) -> int:
        return 0

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.metrics.append((dict(metrics), step))

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass


def _loader(count: int, seed: int) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(count, 8, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=16)


def _fit(tmp_path: Path, doctor: DoctorCallback, head_only: bool, **trainer: Any) -> Any:
    torch.manual_seed(0)
    logger = MemoryLogger()
    fit = pl.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[doctor],
        **trainer,
    )
    fit.fit(Classifier(head_only), _loader(160, 0), _loader(48, 1))
    return logger


def test_optimizer_missing_the_body_is_flagged_printed_and_logged(tmp_path: Path) -> None:
    printed = io.StringIO()
    doctor = DoctorCallback(stream=printed)
    logger = _fit(tmp_path, doctor, head_only=True)
    report = doctor.report
    assert report is not None and "TD601" in report.codes()
    td601 = report.by_code("TD601")[0]
    assert td601.location.path == __file__  # the line that builds the optimizer
    assert "torch.optim.SGD(params" in (td601.location.snippet or "")
    assert "body" in td601.message
    assert "TD601 parameters-missing-from-optimizer" in printed.getvalue()
    assert "torchdoctor: Lightning training" in printed.getvalue()
    logged = [metrics for metrics, _ in logger.metrics if "torchdoctor/errors" in metrics]
    assert logged and logged[-1]["torchdoctor/errors"] >= 1.0


def test_fail_on_error_fails_the_fit_and_keeps_the_report(tmp_path: Path) -> None:
    doctor = DoctorCallback(fail_on="error", print_report=False)
    with pytest.raises(FindingsError, match="TD601") as caught:
        _fit(tmp_path, doctor, head_only=True)
    assert caught.value.report is doctor.report
    assert "TD601" in caught.value.report.codes()


def test_correct_training_with_accumulation_bf16_and_validation_is_quiet(tmp_path: Path) -> None:
    printed = io.StringIO()
    doctor = DoctorCallback(fail_on="warning", stream=printed)
    logger = _fit(
        tmp_path, doctor, head_only=False, accumulate_grad_batches=2, precision="bf16-mixed"
    )
    report = doctor.report
    assert report is not None
    assert [f.code for f in report if f.severity >= Severity.WARNING] == []
    assert report.facts["steps"] == 10  # 2 epochs of 10 batches, one step per 2 batches
    logged = [metrics for metrics, _ in logger.metrics if "torchdoctor/errors" in metrics]
    assert logged[-1]["torchdoctor/errors"] == 0.0 == logged[-1]["torchdoctor/warnings"]


def test_a_failing_fit_still_ends_the_watch(tmp_path: Path) -> None:
    class Broken(Classifier):
        def training_step(self, batch: Any, index: int) -> Any:
            if self.global_step == 2:
                raise RuntimeError("user bug")
            return super().training_step(batch, index)

    doctor = DoctorCallback(print_report=False)
    trainer = pl.Trainer(
        max_epochs=1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[doctor],
    )
    with pytest.raises(RuntimeError, match="user bug"):
        trainer.fit(Broken(), _loader(160, 0))
    assert doctor.report is not None and doctor.report.facts["steps"] == 2
    from torchdoctor.runtime.monitor import active_monitor

    assert active_monitor() is None
