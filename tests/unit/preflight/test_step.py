"""``check`` on training code as people write it: the user's own step, Hugging Face-style
models that return their loss, CTC and weighted batches, low-precision models.

Each setup comes in two styles (a step, and the batch alone where ``check`` can call the
model itself); a bug of the kind each style hides must still be caught through the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import torchdoctor  # noqa: E402
from torchdoctor.errors import UsageError  # noqa: E402
from torchdoctor.preflight.factory import CheckTarget  # noqa: E402

pytestmark = [pytest.mark.needs_torch, pytest.mark.slow]

SERIOUS = {"warning", "error"}


def serious(report: Any) -> set[str]:
    return {f.code for f in report.findings if f.severity.value in SERIOUS}


# --- a tiny causal language model, Hugging Face style -----------------------------------


@dataclass
class CausalLMOutput:
    loss: Any
    logits: Any


class TinyCausalLM(nn.Module):
    def __init__(self, vocab: int = 32, width: int = 16, *, shift_twice: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)
        self.shift_twice = shift_twice

    def forward(
        self, input_ids: Any, attention_mask: Any = None, labels: Any = None
    ) -> CausalLMOutput:
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        # causal mixing: each position sees the running mean of the ones before it
        steps = torch.arange(1, input_ids.shape[1] + 1, device=hidden.device).view(1, -1, 1)
        hidden = self.norm(hidden + torch.relu(self.mix(hidden.cumsum(1) / steps)))
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            shifted = logits[:, :-1] if not self.shift_twice else logits[:, :-2]
            targets = labels[:, 1:] if not self.shift_twice else labels[:, 2:]
            loss = F.cross_entropy(
                shifted.reshape(-1, shifted.shape[-1]), targets.reshape(-1), ignore_index=-100
            )
        return CausalLMOutput(loss, logits)


def lm_batches(count: int = 3, size: int = 8, length: int = 12) -> list[dict[str, Any]]:
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(count):
        ids = torch.randint(0, 32, (size, length), generator=generator)
        mask = torch.ones(size, length, dtype=torch.long)
        mask[: size // 2, -3:] = 0  # padded tails
        labels = ids.masked_fill(mask == 0, -100)
        batches.append({"input_ids": ids, "attention_mask": mask, "labels": labels})
    return batches


def lm_step(model: Any, batch: dict[str, Any]) -> Any:
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    logits = out.logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, 32), batch["labels"][:, 1:].reshape(-1)), out


def test_a_model_that_returns_its_loss_is_checked_from_the_dict_batch_alone() -> None:
    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    report = torchdoctor.check(model, lm_batches(), optimizer=optimizer)
    assert serious(report) == set(), report.findings
    assert report.facts["loss"] == "F.cross_entropy"  # the call inside the forward was seen


def test_a_causal_lm_step_is_checked() -> None:
    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    report = torchdoctor.check(model, lm_batches(), optimizer=optimizer, step=lm_step)
    assert serious(report) == set(), report.findings
    assert report.facts["loss"] == "F.cross_entropy"


def test_a_step_whose_logits_pass_softmax_before_cross_entropy_is_flagged() -> None:
    def step(model: Any, batch: dict[str, Any]) -> Any:
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"])
        probs = out.logits[:, :-1].softmax(-1)
        return F.cross_entropy(probs.reshape(-1, 32), batch["labels"][:, 1:].reshape(-1))

    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    report = torchdoctor.check(model, lm_batches(), optimizer=optimizer, step=step)
    assert "TD301" in serious(report), report.findings


def test_a_step_that_never_reaches_the_head_is_flagged_through_its_gradients() -> None:
    def step(model: Any, batch: dict[str, Any]) -> Any:
        out = model(batch["input_ids"])
        return out.logits.detach().sum() * 0 + model.embed.weight.square().mean()

    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    report = torchdoctor.check(model, lm_batches(), optimizer=optimizer, step=step)
    assert "TD208" in serious(report), report.findings  # params that get no gradient


def test_a_factory_returns_the_step_under_its_key() -> None:
    torch.manual_seed(0)
    model = TinyCausalLM()
    made = {
        "model": model,
        "data": lm_batches(),
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "step": lm_step,
    }
    report = CheckTarget.from_result(made).check()
    assert serious(report) == set(), report.findings


# --- CTC --------------------------------------------------------------------------------


class TinyRecogniser(nn.Module):
    """Images [N, 1, 8, W] to log-probabilities [T=W/2, N, classes] for CTC."""

    def __init__(self, classes: int = 6) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8 * 4, classes)

    def forward(self, images: Any) -> Any:
        features = self.pool(torch.relu(self.conv(images)))  # [N, 8, 4, W/2]
        columns = features.flatten(1, 2).permute(2, 0, 1)  # [T, N, 32]
        return self.head(columns).log_softmax(-1)


def ctc_batch(size: int = 6) -> tuple[Any, Any, Any, Any]:
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(size, 1, 8, 16, generator=generator)
    target_lengths = torch.randint(2, 5, (size,), generator=generator)
    targets = torch.randint(1, 6, (size, 4), generator=generator)
    input_lengths = torch.full((size,), 8, dtype=torch.long)
    return images, targets, input_lengths, target_lengths


def test_a_ctc_batch_of_four_goes_to_the_model_and_the_loss() -> None:
    torch.manual_seed(0)
    model = TinyRecogniser()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    report = torchdoctor.check(model, [ctc_batch()], nn.CTCLoss(), optimizer)
    assert serious(report) == set(), report.findings


def test_a_ctc_step_is_checked() -> None:
    criterion = nn.CTCLoss(zero_infinity=True)

    def step(model: Any, batch: Any) -> Any:
        images, targets, input_lengths, target_lengths = batch
        return criterion(model(images), targets, input_lengths, target_lengths)

    torch.manual_seed(0)
    model = TinyRecogniser()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    report = torchdoctor.check(model, [ctc_batch()], optimizer=optimizer, step=step)
    assert serious(report) == set(), report.findings


# --- extra elements and dtypes ------------------------------------------------------------


def weighted_loss(output: Any, target: Any, weight: Any) -> Any:
    return (F.cross_entropy(output, target, reduction="none") * weight).mean()


def test_a_weighted_batch_gives_its_weights_to_the_loss() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y, w = torch.randn(32, 10), torch.randint(0, 4, (32,)), torch.rand(32)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    report = torchdoctor.check(model, (x, y, w), weighted_loss, optimizer)
    assert serious(report) == set(), report.findings
    assert report.facts["batch"] == {"inputs": [32, 10], "targets": [32]}


def test_a_weighted_step_still_sees_a_softmax_before_cross_entropy() -> None:
    def step(model: Any, batch: Any) -> Any:
        x, y, w = batch
        return (F.cross_entropy(model(x).softmax(1), y, reduction="none") * w).mean()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y, w = torch.randn(32, 10), torch.randint(0, 4, (32,)), torch.rand(32)
    report = torchdoctor.check(model, (x, y, w), step=step)
    assert "TD301" in serious(report), report.findings


def test_a_bfloat16_model_gets_its_inputs_in_bfloat16() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4)).to(torch.bfloat16)
    x, y = torch.randn(32, 10), torch.randint(0, 4, (32,))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    report = torchdoctor.check(model, (x, y), nn.CrossEntropyLoss(), optimizer)
    assert report.facts["model"] == "Sequential"
    assert "TD001" not in report.codes(), report.findings


# --- when nothing fits --------------------------------------------------------------------


def test_a_batch_that_fits_nothing_names_its_structure_and_the_step_to_pass() -> None:
    model = nn.Linear(4, 2)
    with pytest.raises(UsageError) as caught:
        torchdoctor.check(model, {"pixels": torch.ones(2, 4), "mask": torch.ones(2)}, F.mse_loss)
    message = str(caught.value)
    assert "'pixels' (float32 [2, 4])" in message and "step=train_step" in message


def test_without_a_loss_a_batch_the_model_cannot_take_whole_is_refused_clearly() -> None:
    model = nn.Linear(4, 2)
    with pytest.raises(UsageError) as caught:
        torchdoctor.check(model, (torch.ones(2, 4), torch.ones(2, 2)))
    assert "a tuple of 2" in str(caught.value) and "step=" in str(caught.value)


def test_a_step_and_a_loss_together_are_refused() -> None:
    with pytest.raises(UsageError, match="either step"):
        torchdoctor.check(nn.Linear(4, 2), (torch.ones(2, 4),), F.mse_loss, step=lm_step)


def test_a_bfloat16_step_that_casts_its_batch_is_checked() -> None:
    def step(model: Any, batch: Any) -> Any:
        x, y = batch
        return F.cross_entropy(model(x.to(torch.bfloat16)).float(), y)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4)).to(torch.bfloat16)
    x, y = torch.randn(32, 10), torch.randint(0, 4, (32,))
    report = torchdoctor.check(model, (x, y), step=step, select=["TD1", "TD2", "TD3"])
    assert "TD001" not in report.codes(), report.findings
    assert report.facts["loss"] == "F.cross_entropy"


def test_the_memory_forecast_runs_the_step_too() -> None:
    from torchdoctor.preflight.forecast import ForecastOptions

    torch.manual_seed(0)
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    report = torchdoctor.check(
        model,
        lm_batches(),
        optimizer=optimizer,
        step=lm_step,
        select=["TD712"],
        forecast=ForecastOptions("cpu", (8, 16), remedies=False),
    )
    detail = report.facts["forecast_detail"]
    assert "error" not in detail, detail
    small, large = (point["peak_bytes"] for point in report.facts["forecast"])
    assert large > small


def test_a_forward_that_cannot_take_the_split_batch_shows_the_step_to_add() -> None:
    class Renamed(nn.Module):  # takes the mask under another name
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(32, 8)

        def forward(self, input_ids: Any, mask: Any = None) -> Any:
            return self.embed(input_ids).mean(1)

    batch = lm_batches(1)[0]
    batch["labels"] = batch["labels"][:, 0].clamp(min=0) % 8
    with pytest.raises(UsageError) as caught:
        torchdoctor.check(Renamed(), batch, nn.CrossEntropyLoss())
    message = str(caught.value)
    assert "unexpected keyword argument 'attention_mask'" in message
    assert "'input_ids' (int64 [8, 12])" in message and "step=train_step" in message
