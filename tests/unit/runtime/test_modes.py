"""Train/eval mode: evaluation in train mode (TD501), training in eval mode (TD502)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp, step  # noqa: E402

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def seeded() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = mlp(dropout=0.2, batchnorm=True)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def evaluate(model: nn.Module, batches: int = 4) -> None:
    with torch.no_grad():
        for _ in range(batches):
            model(batch()[0])  # marker: evaluate-call


def test_training_after_validation_without_train_is_found() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(3):
            for _ in range(8):
                step(model, optimizer)
            model.eval()
            evaluate(model)  # model.train() is never called again
    [found] = w.report.by_code("TD502")
    assert found.location.path is not None and found.location.path.endswith("training.py")
    assert "model.train()" in found.fix_hint
    assert found.evidence["first_eval_step"] == 9
    assert "was not called again after an evaluation" in found.message


def test_evaluation_in_train_mode_is_found_at_the_call() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(2):
            for _ in range(5):
                step(model, optimizer)
            evaluate(model)  # model.eval() was forgotten
    [found] = w.report.by_code("TD501")
    assert (found.location.path, found.location.line) == (HERE, line_of("marker: evaluate-call"))
    assert "BatchNorm1d" in found.message and "Dropout" in found.message


# -- quiet -----------------------------------------------------------------------------------


def test_correct_train_eval_switching_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(3):
            model.train()
            for _ in range(8):
                step(model, optimizer)
            model.eval()
            evaluate(model)
    assert not w.report.codes() & {"TD501", "TD502"}


def test_frozen_batchnorm_backbone_in_eval_mode_is_quiet() -> None:
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU())
    model = nn.Sequential(backbone, nn.Dropout(0.1), nn.Linear(32, 3))
    for p in backbone.parameters():
        p.requires_grad_(False)
    optimizer = torch.optim.SGD(model[2].parameters(), lr=0.1)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(12):
            model.train()
            backbone.eval()  # frozen statistics on purpose
            step(model, optimizer)
    assert not w.report.codes() & {"TD501", "TD502"}


def test_gan_generator_called_under_no_grad_in_train_mode_is_quiet() -> None:
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
    critic = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4)
    opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4)
    with torchdoctor.watch() as w:
        for _ in range(20):
            with torch.no_grad():
                fake = generator(torch.randn(16, 4))  # train mode on purpose
            opt_c.zero_grad()
            (critic(fake).mean() - critic(torch.randn(16, 8)).mean()).backward()
            opt_c.step()
            opt_g.zero_grad()
            (-critic(generator(torch.randn(16, 4))).mean()).backward()
            opt_g.step()
    assert not w.report.codes() & {"TD501", "TD502"}


def test_swa_batchnorm_update_is_quiet() -> None:
    model, optimizer = seeded()
    loader = [batch()[0] for _ in range(4)]
    with torchdoctor.watch() as w:
        for _ in range(6):
            step(model, optimizer)
        torch.optim.swa_utils.update_bn(loader, model)  # no_grad + train mode, on purpose
    assert not w.report.by_code("TD501")


def test_single_no_grad_forward_per_step_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(10):
            with torch.no_grad():
                model(batch()[0])  # e.g. pseudo-labels for the next step
            step(model, optimizer)
    assert not w.report.by_code("TD501")
