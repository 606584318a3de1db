"""Batch independence (TD508; TD109 for a recurrent layer run along the batch): in eval
mode one example's output must not depend on the other examples of its batch or on their
padding. Flagged: the classes that break it; quiet: correct models that mix examples on
purpose, or that only look like they might."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from tests.lab import labkit  # noqa: E402
from torchdoctor.findings import Depth, Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402
from torchdoctor.preflight.factory import CheckTarget  # noqa: E402

pytestmark = pytest.mark.needs_torch

CODES = ["TD508", "TD109"]
B, T, FEAT, VOCAB, DIM = 16, 10, 6, 40, 32
LAB = Path(__file__).resolve().parents[3] / "examples" / "lab"


def _findings(model, data, loss_fn=None, **options):
    report = check(model, data, loss_fn, select=CODES, **options)
    assert "TD001" not in report.codes(), report.by_code("TD001")
    return report.findings


def _sequences():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(B, T, FEAT, generator=generator), torch.arange(B) % 3


def _flat():
    generator = torch.Generator().manual_seed(2)
    return torch.randn(B, FEAT, generator=generator), torch.arange(B) % 3


def _tokens(size: int = 12, length: int = 9):
    generator = torch.Generator().manual_seed(3)
    lengths = torch.randint(3, length + 1, (size,), generator=generator)
    lengths[0] = length
    ids = torch.randint(1, VOCAB, (size, length), generator=generator)
    mask = (torch.arange(length)[None] < lengths[:, None]).long()
    return ids * mask, mask, torch.arange(size) % 2


def _line(text: str) -> int:
    """Line of ``text`` in this file (where a finding must point)."""
    lines = Path(__file__).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


# --- the classes that break it ----------------------------------------------------------


class Recurrent(nn.Module):
    def __init__(self, batch_first: bool) -> None:
        super().__init__()
        self.gru = nn.GRU(FEAT, 12, batch_first=batch_first)
        self.head = nn.Linear(12, 3)

    def forward(self, x):
        states, _ = self.gru(x)  # the recurrent layer's line
        return self.head(states.mean(1))


def test_sequence_first_rnn_given_batch_first_input_is_td109_at_its_line() -> None:
    (found,) = _findings(Recurrent(batch_first=False), _sequences(), nn.CrossEntropyLoss())
    assert found.code == "TD109"
    assert found.location.object == "gru"
    assert found.location.line == _line("the recurrent layer's line")
    assert "batch_first=True" in found.fix_hint
    assert found.evidence["input_shape"] == [B, T, FEAT]


class Normalised(nn.Module):
    def __init__(self, track: bool = True) -> None:
        super().__init__()
        self.body = nn.Linear(FEAT, 16)
        self.bn = nn.BatchNorm1d(16, track_running_stats=track)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(F.relu(self.bn(self.body(x))))


class KeptTraining(Normalised):
    """Its train() override keeps the BatchNorm in training mode."""

    def train(self, mode: bool = True):
        super().train(mode)
        self.bn.train(True)
        return self


def test_batchnorm_without_running_statistics_is_a_warning_naming_it() -> None:
    (found,) = _findings(Normalised(track=False), _flat(), nn.CrossEntropyLoss())
    assert (found.code, found.severity, found.location.object) == ("TD508", Severity.WARNING, "bn")
    assert "track_running_stats=False" in found.message


def test_batchnorm_kept_in_training_mode_is_an_error_from_a_loader() -> None:
    loader = DataLoader(TensorDataset(*_flat()), batch_size=8)
    (found,) = _findings(KeptTraining(), loader, nn.CrossEntropyLoss())
    assert (found.code, found.severity, found.location.object) == ("TD508", Severity.ERROR, "bn")
    assert "still in training mode" in found.message


class HandNormalised(nn.Module):
    def __init__(self, over_batch: bool) -> None:
        super().__init__()
        self.over_batch, self.head = over_batch, nn.Linear(FEAT, 3)

    def forward(self, x):
        return self.head(self.standardise(x))

    def standardise(self, x):
        if self.over_batch:
            return (x - x.mean(0)) / (x.std(0) + 1e-5)  # over the batch
        return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5)


def test_normalisation_over_dim_zero_in_a_helper_is_found_at_its_line() -> None:
    (found,) = _findings(HandNormalised(over_batch=True), _flat(), nn.CrossEntropyLoss())
    assert found.code == "TD508"
    assert found.evidence["op"] == "mean"
    assert found.location.line == _line("# over the batch")


class Reshaped(nn.Module):
    """A sequence-first LSTM whose output is flattened per example."""

    def __init__(self, transpose_first: bool) -> None:
        super().__init__()
        self.lstm, self.head = nn.LSTM(FEAT, 8), nn.Linear(8 * T, 3)
        self.transpose_first = transpose_first

    def forward(self, x):
        out, _ = self.lstm(x.transpose(0, 1))  # (T, B, 8)
        if self.transpose_first:
            return self.head(out.transpose(0, 1).reshape(x.size(0), -1))
        return self.head(out.reshape(x.size(0), -1))  # mixes the batch


def test_reshape_across_the_batch_dimension_is_named() -> None:
    (found,) = _findings(Reshaped(transpose_first=False), _sequences(), nn.CrossEntropyLoss())
    assert (found.code, found.evidence["op"]) == ("TD508", "reshape")
    assert found.location.line == _line("# mixes the batch")


class TokenEncoder(nn.Module):
    def __init__(self, masked: bool) -> None:
        super().__init__()
        self.masked = masked
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=0)
        layer = nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, 2)

    def forward(self, ids):
        pad = ids == 0
        hidden = self.encoder(self.embed(ids), src_key_padding_mask=pad if self.masked else None)
        keep = (~pad).unsqueeze(-1).float()
        return self.head((hidden * keep).sum(1) / keep.sum(1))


def test_attention_without_padding_mask_is_found_by_padding_the_batch() -> None:
    ids, _, labels = _tokens()
    (found,) = _findings(TokenEncoder(masked=False), (ids, labels), nn.CrossEntropyLoss())
    assert found.code == "TD508"
    assert found.evidence["variant"] == "padding added"
    assert found.location.object.endswith("self_attn")
    assert "key_padding_mask" in found.fix_hint


class DictModel(nn.Module):
    """Hugging Face style: keyword inputs, an output with `loss` and `logits`."""

    def __init__(self, masked: bool, causal: bool = False) -> None:
        super().__init__()
        self.masked, self.causal = masked, causal
        self.embed = nn.Embedding(VOCAB, DIM)
        self.attention = nn.MultiheadAttention(DIM, 4, batch_first=True)
        self.lm = nn.Linear(DIM, VOCAB)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden = self.embed(input_ids)
        length = input_ids.size(1)
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        mixed, _ = self.attention(
            hidden,
            hidden,
            hidden,
            key_padding_mask=attention_mask == 0 if self.masked else None,
            attn_mask=causal if self.causal else None,
        )
        logits = self.lm(hidden + mixed)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten())
        return SimpleNamespace(loss=loss, logits=logits)


def _dict_batch():
    ids, mask, _ = _tokens()
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def _step(model, batch):
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"])
    return out.loss, out.logits


def test_dict_batch_through_a_step_without_the_mask_is_flagged() -> None:
    (found,) = _findings(DictModel(masked=False), [_dict_batch()], step=_step)
    assert (found.code, found.location.object) == ("TD508", "attention")


def test_dict_batch_passed_whole_without_the_mask_is_flagged() -> None:
    (found,) = _findings(DictModel(masked=False), _dict_batch())
    assert found.evidence["variant"] == "padding added"


class MeanPooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Embedding(VOCAB, DIM, padding_idx=0), nn.Linear(DIM, 2)

    def forward(self, ids):
        return self.head(self.embed(ids).mean(1))  # averages the padding in


def test_mean_over_the_padded_length_is_flagged_at_its_line() -> None:
    ids, _, labels = _tokens()
    (found,) = _findings(MeanPooled(), (ids, labels), nn.CrossEntropyLoss())
    assert found.location.line == _line("averages the padding in")


# --- correct models stay quiet ----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "data"),
    [
        (Recurrent(batch_first=True), _sequences()),
        (Normalised(), _flat()),
        (HandNormalised(over_batch=False), _flat()),
        (Reshaped(transpose_first=True), _sequences()),
        (TokenEncoder(masked=True), _tokens()[::2]),
    ],
    ids=["batch-first-rnn", "batchnorm", "per-example-norm", "transpose-then-reshape", "mask"],
)
def test_the_fixed_versions_are_quiet(model, data) -> None:
    assert _findings(model, data, nn.CrossEntropyLoss()) == []


def test_dict_batches_with_the_mask_or_causal_attention_are_quiet() -> None:
    assert _findings(DictModel(masked=True), [_dict_batch()], step=_step) == []
    # Right padding after causal attention: no real position ever sees a padded one.
    assert _findings(DictModel(masked=False, causal=True), _dict_batch()) == []


class Similarity(nn.Module):
    """CLIP style: logits of every example against every other."""

    def __init__(self) -> None:
        super().__init__()
        self.image, self.text = nn.Linear(FEAT, 16), nn.Linear(FEAT, 16)

    def forward(self, x):
        return F.normalize(self.image(x), dim=-1) @ F.normalize(self.text(x), dim=-1).T


class BatchMemory(nn.Module):
    """Attends over the other examples of the batch on purpose (hidden as long as the
    batch, so the shapes alone cannot say which dimension is the batch)."""

    def __init__(self) -> None:
        super().__init__()
        self.query, self.head = nn.Linear(FEAT, B), nn.Linear(B, 3)

    def forward(self, x):
        q = self.query(x)
        return self.head(torch.softmax(q @ q.T / 4, dim=-1) @ q)


class SetModel(nn.Module):
    """The examples are the elements of one set, attended as one sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Linear(FEAT, 16), nn.Linear(16, 3)
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        h = self.embed(x).unsqueeze(0)
        return self.head(self.attention(h, h, h)[0].squeeze(0))


class GraphLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEAT, 3)

    def forward(self, x, edges):
        messages = torch.zeros_like(x).index_add_(0, edges[1], x[edges[0]])
        return self.linear(x + messages)


class FixedGraph(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEAT, 3)
        self.register_buffer("adjacency", (torch.rand(B, B) > 0.7).float())

    def forward(self, x):
        return self.linear(self.adjacency @ x)


class DropoutInEval(Normalised):
    """Random in eval mode (TD504's problem): too noisy to judge, so skipped."""

    def forward(self, x):
        return self.head(F.dropout(self.bn(self.body(x)), 0.3))


def _in_batch_loss(logits, _targets):
    return F.cross_entropy(logits, torch.arange(len(logits)))


def test_models_that_mix_examples_on_purpose_are_quiet() -> None:
    x, y = _flat()
    edges = torch.randint(0, B, (2, 40), generator=torch.Generator().manual_seed(4))
    assert _findings(Similarity(), (x, y), _in_batch_loss) == []
    assert _findings(BatchMemory(), (x, y), nn.CrossEntropyLoss()) == []
    assert _findings(SetModel(), (x, y), nn.CrossEntropyLoss()) == []
    assert _findings(GraphLayer(), (x, edges, y), nn.CrossEntropyLoss()) == []
    assert _findings(FixedGraph(), (x, y), nn.CrossEntropyLoss()) == []


def test_a_model_random_in_eval_is_left_to_td504() -> None:
    model = DropoutInEval(track=False)
    assert _findings(model, _flat(), nn.CrossEntropyLoss()) == []


class Packed(nn.Module):
    """Packs by length; the output is as long as the batch's longest sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.head = nn.LSTM(FEAT, 8, batch_first=True), nn.Linear(8, 3)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        out, _ = nn.utils.rnn.pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
        return self.head(out)


def _per_step_loss(output, targets):
    return F.cross_entropy(output.flatten(0, 1), targets[:, : output.size(1)].flatten())


def test_outputs_trimmed_to_the_longest_sequence_and_tiny_batches_are_quiet() -> None:
    x, _ = _sequences()
    lengths = torch.randint(2, T, (B,), generator=torch.Generator().manual_seed(5))
    targets = torch.zeros(B, T, dtype=torch.long)
    assert _findings(Packed(), (x, lengths, targets), _per_step_loss) == []
    one = (x[:1], torch.zeros(1, dtype=torch.long))
    assert _findings(Recurrent(batch_first=False), one, nn.CrossEntropyLoss()) == []


# --- the lab, in its three shapes -------------------------------------------------------

FACTORIES = ["make", "make_helpers", "make_step"]


@pytest.mark.slow
@pytest.mark.parametrize("factory", FACTORIES)
def test_lab_shapes_buggy_flagged_fixed_quiet(factory: str) -> None:
    folder = LAB / "TD508-eval-output-depends-on-batch"
    for name, expected in (("buggy", {"TD508"}), ("fixed", set())):
        module = labkit.load_module(folder / f"{name}.py")
        target = CheckTarget.from_result(getattr(module, factory)(), f"{name}:{factory}")
        report = target.check(select=CODES)
        assert set(report.codes()) == expected, (name, factory, report.findings)
        lines = {line for _, line in labkit.expected_marks(folder / f"{name}.py", Depth.CHECK)}
        assert all(f.location.line in lines for f in report.findings)


# --- sequence-first data: its layout is not mistaken for the batch's ---------------------


class WordModel(nn.Module):
    """word_language_model's shape: (seq, batch) ids, a sequence-first LSTM, outputs
    (seq, batch, vocab)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.lstm = nn.Embedding(VOCAB, DIM), nn.LSTM(DIM, DIM)
        self.decoder = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.decoder(self.lstm(self.embed(ids))[0])


def _word_step(model, batch):
    data, targets = batch
    return F.cross_entropy(model(data).view(-1, VOCAB), targets)


def test_sequence_first_batches_through_a_step_are_quiet() -> None:
    stream = torch.randint(0, VOCAB, (36, 4), generator=torch.Generator().manual_seed(6))
    batches = [(stream[i : i + 8], stream[i + 1 : i + 9].reshape(-1)) for i in (0, 9, 18)]
    assert _findings(WordModel(), batches, step=_word_step) == []


class SequenceFirstClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm, self.head = nn.LSTM(FEAT, 8), nn.Linear(8, 3)

    def forward(self, x):  # x: (seq, batch, features)
        return self.head(self.lstm(x)[1][0][-1])


def test_as_many_steps_as_examples_is_not_judged() -> None:
    x = torch.randn(B, B, FEAT, generator=torch.Generator().manual_seed(7))
    assert (
        _findings(SequenceFirstClassifier(), (x, torch.arange(B) % 3), nn.CrossEntropyLoss()) == []
    )


class SequenceFirstEncoder(nn.Module):
    """A sequence-first Transformer encoder (no batch_first) over token ids."""

    def __init__(self, transpose: bool) -> None:
        super().__init__()
        self.transpose = transpose
        self.embed = nn.Embedding(VOCAB, DIM)
        layer = nn.TransformerEncoderLayer(DIM, 4, 64, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(DIM, 3)

    def forward(self, ids):
        if self.transpose:
            return self.head(self.encoder(self.embed(ids).transpose(0, 1)).mean(0))
        return self.head(self.encoder(self.embed(ids)).mean(1))


def test_sequence_first_attention_given_batch_first_input_and_its_fix() -> None:
    ids = torch.randint(0, VOCAB, (6, 11), generator=torch.Generator().manual_seed(8))
    data = (ids, torch.arange(6) % 3)
    (found,) = _findings(SequenceFirstEncoder(transpose=False), data, nn.CrossEntropyLoss())
    assert (found.code, found.location.object) == ("TD508", "encoder.layers.0.self_attn")
    assert "batch_first=True" in found.fix_hint
    assert _findings(SequenceFirstEncoder(transpose=True), data, nn.CrossEntropyLoss()) == []
