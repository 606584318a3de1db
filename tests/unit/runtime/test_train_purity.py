"""The TD507 shadow runs a model's own ``train()`` only when its source proves it sets
nothing but modes and flags: a ``train()`` that writes a file, keeps a counter on a shared
object or calls into another library is never called by the monitor."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402
from torchdoctor.runtime.train_purity import train_is_pure  # noqa: E402


class Stages(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)) for _ in range(2)
        )
        self.frozen = 1
        self.norm_eval = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for stage in self.stages:
            x = stage(x)
        return x


class FlagsOnly(Stages):
    """mmcv style: freeze through a helper, BatchNorm to eval, a log line."""

    def _freeze(self) -> None:
        for i in range(self.frozen):
            self.stages[i].eval()
            for p in self.stages[i].parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> FlagsOnly:
        super().train(mode)
        self._freeze()
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, nn.BatchNorm1d):
                    m.eval()
        print("frozen stages:", self.frozen)
        return self


class Counting(Stages):
    calls: list[bool] = []  # shared by every instance (and by a shallow copy)

    def train(self, mode: bool = True) -> Counting:
        Counting.calls.append(mode)
        super().train(mode)
        self.stages[0].requires_grad_(False)
        return self


class Writing(Stages):
    path: Path | None = None

    def train(self, mode: bool = True) -> Writing:
        super().train(mode)
        self.stages[0].requires_grad_(False)
        if self.path is not None:
            with open(self.path, "a") as log:
                print("train", mode, file=log)
        return self


class Impure(FlagsOnly):
    """A pure override whose base class is not: both run through super()."""

    def train(self, mode: bool = True) -> Impure:
        super().train(mode)
        return self


class ImpureBase(Stages):
    def train(self, mode: bool = True) -> ImpureBase:
        super().train(mode)
        torch.manual_seed(0)  # touches the global RNG
        return self


class PureOnImpure(ImpureBase):
    def train(self, mode: bool = True) -> PureOnImpure:
        super().train(mode)
        self.stages[0].requires_grad_(False)
        return self


def test_a_train_that_only_sets_modes_and_flags_is_pure() -> None:
    assert train_is_pure(FlagsOnly)
    assert train_is_pure(Impure)  # its base is FlagsOnly


@pytest.mark.parametrize("cls", [Counting, Writing, PureOnImpure])
def test_a_train_that_touches_anything_else_is_not(cls: type) -> None:
    assert not train_is_pure(cls)


def watched_steps(model: nn.Module) -> set[str]:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(0)
    with torchdoctor.watch() as session:
        for _ in range(4):
            optimizer.zero_grad()
            x = torch.randn(8, 4, generator=generator)
            F.mse_loss(model(x), torch.zeros(8, 4)).backward()
            optimizer.step()
    return session.report.codes()


def test_the_pure_train_is_asked_and_its_freezing_found() -> None:
    assert "TD507" in watched_steps(FlagsOnly())


def test_a_counting_train_is_never_called_by_the_monitor() -> None:
    Counting.calls.clear()
    codes = watched_steps(Counting())
    assert Counting.calls == []
    assert "TD507" not in codes  # not proved, so not claimed


def test_a_train_that_writes_a_file_is_never_called_by_the_monitor(tmp_path: Path) -> None:
    model = Writing()
    model.path = tmp_path / "train.log"
    watched_steps(model)
    assert not model.path.exists()
