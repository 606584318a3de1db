"""A sequence-first RNN fed batch-first data (TD109 at run time)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import torchdoctor  # noqa: E402
from tests.unit.runtime.shapes import SHAPES, train  # noqa: E402

BATCH, SEQ, FEATURES = 16, 7, 5


class Reader(nn.Module):
    """Reads (batch, seq, features) sequences and classifies them from the last state."""

    def __init__(self, layer: type = nn.LSTM, batch_first: bool = False, transpose: bool = False):
        super().__init__()
        self.rnn = layer(FEATURES, 12, 1, batch_first=batch_first)
        self.head = nn.Linear(12, 3)
        self.batch_first, self.transpose = batch_first, transpose

    def forward(self, x: Any) -> Any:
        if self.transpose:  # time-major on purpose
            out, _ = self.rnn(x.transpose(0, 1))
            return self.head(out[-1])
        out, _ = self.rnn(x)
        return self.head(out.mean(dim=1))


def sequences(n: int = BATCH, seq: int = SEQ) -> tuple[Any, Any]:
    x = torch.randn(n, seq, FEATURES)
    return x, (x[:, :, 0].mean(1) > 0).long()


def classify(model: Any, x: Any, y: Any) -> Any:
    return F.cross_entropy(model(x), y)


@pytest.mark.parametrize("shape", SHAPES)
def test_batch_first_data_in_a_sequence_first_lstm_is_found(shape: str) -> None:
    torch.manual_seed(0)
    [found] = train(shape, Reader(), classify, sequences).by_code("TD109")
    assert found.location.object == "rnn"
    assert found.evidence["input_shape"] == [BATCH, SEQ, FEATURES]
    assert found.evidence["examples"] == BATCH


@pytest.mark.parametrize("shape", SHAPES)
def test_a_batch_first_layer_is_quiet(shape: str) -> None:
    torch.manual_seed(0)
    report = train(shape, Reader(batch_first=True), classify, sequences)
    assert "TD109" not in report.codes()


@pytest.mark.parametrize("shape", SHAPES)
def test_time_major_code_that_transposes_is_quiet(shape: str) -> None:
    torch.manual_seed(0)
    report = train(shape, Reader(nn.GRU, transpose=True), classify, sequences)
    assert "TD109" not in report.codes()


def test_a_sequence_as_long_as_the_batch_is_not_judged() -> None:
    torch.manual_seed(0)
    report = train("loop", Reader(), classify, lambda: sequences(SEQ, SEQ))
    assert "TD109" not in report.codes()


def test_the_dataloader_batch_size_tells_when_the_loss_has_no_target() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, SEQ, FEATURES)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x, x[:, :, :1].mean(1)), batch_size=BATCH
    )
    model = nn.ModuleDict({"rnn": nn.GRU(FEATURES, 8, 1), "head": nn.Linear(8, 1)})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torchdoctor.watch() as session:
        for _ in range(2):
            for xb, yb in loader:
                out, _ = model["rnn"](xb)
                loss = F.l1_loss(model["head"](out.mean(1)), yb)  # no loss node: a mean
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    assert "TD109" in session.report.codes()


def test_packed_sequences_are_not_judged() -> None:
    torch.manual_seed(0)
    rnn, head = nn.LSTM(FEATURES, 8, 1), nn.Linear(8, 3)
    optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
    with torchdoctor.watch() as session:
        for _ in range(6):
            x, y = sequences()
            packed = nn.utils.rnn.pack_padded_sequence(
                x.transpose(0, 1), torch.full((BATCH,), SEQ), enforce_sorted=False
            )
            _, (hidden, _) = rnn(packed)
            optimizer.zero_grad()
            F.cross_entropy(head(hidden[-1]), y).backward()
            optimizer.step()
    assert "TD109" not in session.report.codes()


def test_per_step_targets_laid_out_like_the_input_are_not_judged() -> None:
    """A time-major sequence-to-sequence regression: targets are (seq, batch, 1)."""
    torch.manual_seed(0)
    rnn, head = nn.GRU(FEATURES, 8, 1), nn.Linear(8, 1)
    optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
    with torchdoctor.watch() as session:
        for _ in range(6):
            x = torch.randn(SEQ * 2, BATCH, FEATURES)
            out, _ = rnn(x)
            optimizer.zero_grad()
            F.mse_loss(head(out), x[:, :, :1].cumsum(0)).backward()
            optimizer.step()
    assert "TD109" not in session.report.codes()


def test_one_sequence_with_a_target_per_step_is_not_judged() -> None:
    """Batch of one, time-major: input (seq, 1, features) and a target per time step."""
    torch.manual_seed(0)
    rnn, head = nn.LSTM(FEATURES, 8, 1), nn.Linear(8, 3)
    optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.05)
    with torchdoctor.watch() as session:
        for _ in range(6):
            x = torch.randn(SEQ, 1, FEATURES)
            out, _ = rnn(x)
            optimizer.zero_grad()
            F.cross_entropy(head(out[:, 0]), (x[:, 0, 0] > 0).long()).backward()
            optimizer.step()
    assert "TD109" not in session.report.codes()


def test_a_decoder_fed_one_time_step_at_a_time_is_quiet() -> None:
    torch.manual_seed(0)
    cell, head = nn.GRU(FEATURES, 8, 1), nn.Linear(8, 3)
    optimizer = torch.optim.SGD([*cell.parameters(), *head.parameters()], lr=0.05)
    with torchdoctor.watch() as session:
        for _ in range(6):
            x, y = sequences()
            hidden = torch.zeros(1, BATCH, 8)
            for t in range(SEQ):
                _, hidden = cell(x[:, t].unsqueeze(0), hidden)
            optimizer.zero_grad()
            F.cross_entropy(head(hidden[-1]), y).backward()
            optimizer.step()
    assert "TD109" not in session.report.codes()
