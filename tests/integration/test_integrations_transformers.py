"""DoctorCallback in a real Hugging Face Trainer, on tiny models built from configs (nothing
downloaded): a buggy training is flagged, the same training fixed (with evaluation and
gradient accumulation) is not."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # the Trainer needs it

from torch import nn  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.integrations.transformers import DoctorCallback, FindingsError  # noqa: E402


class TinyConfig(transformers.PretrainedConfig):
    model_type = "torchdoctor-tiny"

    def __init__(
        self, vocab_size: int = 100, hidden: int = 32, num_labels: int = 2, **kwargs: Any
    ) -> None:
        super().__init__(num_labels=num_labels, **kwargs)
        self.vocab_size = vocab_size
        self.hidden = hidden


class TinyClassifier(transformers.PreTrainedModel):
    """Embedding bag and an MLP: a custom model as people write them for the Trainer."""

    config_class = TinyConfig

    def __init__(self, config: TinyConfig) -> None:
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden)
        self.body = nn.Sequential(
            nn.Linear(config.hidden, config.hidden), nn.GELU(), nn.LayerNorm(config.hidden)
        )
        self.classifier = nn.Linear(config.hidden, config.num_labels)
        self.post_init()

    def forward(self, input_ids: Any, attention_mask: Any = None, labels: Any = None) -> Any:
        hidden = self.body(self.embed(input_ids).mean(dim=1))
        logits = self.classifier(hidden)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return transformers.modeling_outputs.SequenceClassifierOutput(loss=loss, logits=logits)


class Tokens(Dataset):
    """Random token sequences whose label is decided by their first token."""

    def __init__(self, count: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, 100, (count, 12), generator=generator)
        self.labels = (self.ids[:, 0] > 50).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {
            "input_ids": self.ids[index],
            "attention_mask": torch.ones(12, dtype=torch.long),
            "labels": self.labels[index],
        }


def _tiny() -> Any:
    torch.manual_seed(0)
    return TinyClassifier(TinyConfig())


def _bert() -> Any:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    return transformers.BertForSequenceClassification(config)


def _train(
    tmp_path: Path,
    model: Any,
    doctor: DoctorCallback,
    *,
    head_only: bool,
    accumulate: int = 1,
    optim: str = "adamw_torch",
) -> Any:
    optimizers: Any = (None, None)
    if head_only:
        optimizers = (torch.optim.AdamW(model.classifier.parameters(), lr=1e-3), None)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to=[],
        per_device_train_batch_size=8,
        num_train_epochs=2,
        learning_rate=1e-3,
        eval_strategy="epoch",
        save_strategy="no",
        logging_steps=4,
        gradient_accumulation_steps=accumulate,
        disable_tqdm=True,
        seed=0,
        optim=optim,
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=Tokens(64, 0),
        eval_dataset=Tokens(16, 1),
        optimizers=optimizers,
        callbacks=[doctor],
    )
    trainer.train()
    return trainer


@pytest.mark.parametrize("make", [_tiny, _bert], ids=["custom", "bert"])
def test_optimizer_on_the_head_only_is_flagged_printed_and_logged(
    tmp_path: Path, make: Any
) -> None:
    printed = io.StringIO()
    doctor = DoctorCallback(stream=printed)
    trainer = _train(tmp_path, make(), doctor, head_only=True)
    report = doctor.report
    assert report is not None and "TD601" in report.codes()
    assert "torchdoctor: Transformers training" in printed.getvalue()
    counts = trainer.state.log_history[-1]
    assert counts["torchdoctor/errors"] >= 1.0 and counts["step"] == 16.0


def test_fail_on_error_fails_the_training(tmp_path: Path) -> None:
    doctor = DoctorCallback(fail_on="error", print_report=False)
    with pytest.raises(FindingsError, match="TD601"):
        _train(tmp_path, _tiny(), doctor, head_only=True)
    assert doctor.report is not None and "TD601" in doctor.report.codes()


def test_correct_training_with_accumulation_and_evaluation_is_quiet(tmp_path: Path) -> None:
    doctor = DoctorCallback(fail_on="warning", print_report=False)
    trainer = _train(tmp_path, _tiny(), doctor, head_only=False, accumulate=2)
    report = doctor.report
    assert report is not None and not report.findings
    assert report.facts["steps"] == 8  # 2 epochs of 8 batches, one step per 2 batches
    assert trainer.state.log_history[-1]["torchdoctor/warnings"] == 0.0


def test_correct_bert_training_gives_no_warning(tmp_path: Path) -> None:
    doctor = DoctorCallback(print_report=False)
    _train(tmp_path, _bert(), doctor, head_only=False, accumulate=2)
    assert doctor.report is not None
    assert [f.code for f in doctor.report if f.severity >= Severity.WARNING] == []


def test_correct_training_with_the_fused_default_optimizer_is_quiet(tmp_path: Path) -> None:
    doctor = DoctorCallback(print_report=False)
    _train(tmp_path, _tiny(), doctor, head_only=False, optim="adamw_torch_fused")
    assert doctor.report is not None
    assert [f.code for f in doctor.report if f.severity >= Severity.WARNING] == []
