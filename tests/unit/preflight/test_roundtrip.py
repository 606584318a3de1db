"""Save/load round trip: state that a state_dict does not carry (TD908)."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import torch.nn.utils.prune as prune  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils.parametrizations import spectral_norm, weight_norm  # noqa: E402

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.preflight import check  # noqa: E402

pytestmark = pytest.mark.needs_torch


def _batch() -> tuple:
    generator = torch.Generator().manual_seed(1)
    return 3 + torch.randn(16, 4, generator=generator), torch.arange(16) % 3


class Centre(nn.Module):
    """Subtracts a running mean of its inputs, kept in one of several ways."""

    def __init__(self, storage: str) -> None:
        super().__init__()
        self.storage = storage
        if storage == "attribute":
            self.mean = torch.zeros(4)
        else:
            self.register_buffer("mean", torch.zeros(4), persistent=storage == "buffer")

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                update = 0.5 * self.mean + 0.5 * x.mean(0)
            if self.storage == "attribute":
                self.mean = update
            else:
                self.mean.copy_(update)
        return x - self.mean


class Annealed(nn.Module):
    """A classifier whose softmax temperature (a float) and step count change in training."""

    def __init__(self, temperature_used: bool = True) -> None:
        super().__init__()
        self.layer, self.temperature, self.steps = nn.Linear(4, 3), 2.0, 0
        self.temperature_used = temperature_used

    def forward(self, x):
        if self.training:
            self.temperature *= 0.9
            self.steps += 1
        scale = self.temperature if self.temperature_used else 1.0
        return self.layer(x) / scale


def _run(model):
    torch.manual_seed(0)
    optimizer = (
        torch.optim.SGD(model.parameters(), lr=0.1)
        if any(True for _ in model.parameters())
        else None
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pruning and old weight_norm warn on use
        report = check(model, _batch(), nn.CrossEntropyLoss(), optimizer, select=["TD908"])
    return report.by_code("TD908")


def _centred(storage: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(Centre(storage), nn.Linear(4, 3))


# --- positive ----------------------------------------------------------------------------------


def test_a_running_mean_kept_as_a_plain_attribute_is_lost_and_confirmed() -> None:
    [found] = _run(_centred("attribute"))
    assert found.location.object == "0.mean"
    assert found.severity is Severity.WARNING
    assert "(tensor attribute) changed in a training step" in found.message
    assert found.evidence["relative_difference"] > 1e-3
    assert "register_buffer('mean'" in found.fix_hint


def test_a_non_persistent_buffer_that_training_changes_is_lost() -> None:
    [found] = _run(_centred("non-persistent"))
    assert "(non-persistent buffer)" in found.message
    assert "persistent=True" in found.fix_hint


def test_of_two_changed_numbers_only_the_one_the_output_reads_is_a_warning() -> None:
    torch.manual_seed(0)
    found = {f.location.object: f for f in _run(Annealed())}
    assert found["temperature"].severity is Severity.WARNING
    assert "1.8 -> 1.62" in found["temperature"].message
    assert found["steps"].severity is Severity.INFO


def test_a_constant_plain_tensor_attribute_is_information() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer, self.mask = nn.Linear(4, 3), torch.tensor([1.0, 0.0, 1.0])

        def forward(self, x):
            return self.layer(x) * self.mask

    torch.manual_seed(0)
    [found] = _run(Masked())
    assert found.severity is Severity.INFO
    assert "plain tensor attribute (tensor[3])" in found.message
    assert "does not move with `model.to(device)`" in found.message


def test_a_state_dict_that_weights_only_loading_refuses_is_reported() -> None:
    class Tokenizer:
        vocabulary = ("a", "b")

    class WithExtraState(nn.Linear):
        def get_extra_state(self):
            return Tokenizer()

        def set_extra_state(self, state) -> None:
            pass

    torch.manual_seed(0)
    [found] = _run(WithExtraState(4, 3))
    assert "does not survive a save" in found.message
    assert "get_extra_state()" in found.fix_hint


def test_state_in_a_list_shows_through_the_outputs() -> None:
    class Remembers(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer, self.seen = nn.Linear(4, 3), []

        def forward(self, x):
            if self.training:
                self.seen.append(float(x.mean()))
            return self.layer(x) + sum(self.seen)

    torch.manual_seed(0)
    [found] = _run(Remembers())
    assert "no tensor or number attribute changed" in found.message


# --- negative ----------------------------------------------------------------------------------


def test_a_running_mean_in_a_buffer_is_quiet() -> None:
    assert _run(_centred("buffer")) == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)),
        lambda: nn.Sequential(weight_norm(nn.Linear(4, 8)), spectral_norm(nn.Linear(8, 3))),
        lambda: nn.Sequential(
            prune.l1_unstructured(nn.Linear(4, 8), "weight", 0.5), nn.Linear(8, 3)
        ),
        lambda: nn.Sequential(nn.utils.weight_norm(nn.Linear(4, 3))),
        lambda: Annealed(temperature_used=False).requires_grad_(True),
    ],
    ids=["batchnorm", "parametrizations", "pruning", "old-weight-norm", "no-number-used"],
)
def test_state_kept_in_parameters_buffers_or_recomputed_is_not_a_warning(make) -> None:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make()
    assert [f for f in _run(model) if f.severity is not Severity.INFO] == []


def test_an_lstm_and_its_flat_weight_list_are_quiet() -> None:
    class Reader(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm, self.head = nn.LSTM(4, 6, batch_first=True), nn.Linear(6, 3)

        def forward(self, x):
            return self.head(self.lstm(x.unsqueeze(1))[0][:, -1])

    torch.manual_seed(0)
    assert _run(Reader()) == []


def test_extra_state_made_of_plain_values_survives_the_round_trip() -> None:
    class Versioned(nn.Linear):
        def get_extra_state(self):
            return {"version": 2, "scale": 0.5}

        def set_extra_state(self, state) -> None:
            self.version = state["version"]

    torch.manual_seed(0)
    assert _run(Versioned(4, 3)) == []
