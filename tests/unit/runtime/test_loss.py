"""Loss dynamics (TD612, TD613, TD614) on synthetic curves: noise, warm-up, GANs."""

from __future__ import annotations

import math
import random

import pytest

pytestmark = pytest.mark.needs_torch
pytest.importorskip("torch")  # the detectors package imports torch-using modules

from tests.unit.runtime.fakes import SITE, FakeMonitor, attach, codes, finish  # noqa: E402
from torchdoctor.runtime.detectors.base import (  # noqa: E402
    BackwardEvent,
    CallSite,
    LossValue,
    StepEvent,
)
from torchdoctor.runtime.detectors.loss import LossDynamics, spearman  # noqa: E402


class _Optimizer:
    def __init__(self, lr: float) -> None:
        self.param_groups = [{"lr": lr}]


class _Info:
    def __init__(self, index: int, lr: float) -> None:
        self.index = index
        self.optimizer = _Optimizer(lr)


class _Trained:
    def __init__(self, params: tuple[int, ...]) -> None:
        self.params = tuple(_PARAMS.setdefault(p, object()) for p in params)


_PARAMS: dict[int, object] = {}


def judge(
    curves: dict[CallSite, list[float]],
    lrs: list[float] | None = None,
    optimizers: int = 1,
    trained: dict[int, tuple[int, ...]] | None = None,
) -> set[str]:
    """Feed curves (one loss per step) and learning rates; return the codes found.
    ``trained`` maps a step to the parameters an optimizer first seen then holds."""
    monitor = FakeMonitor()
    detector = attach(LossDynamics(), monitor)
    length = max(len(v) for v in curves.values())
    infos = [_Info(i, 0.1) for i in range(optimizers)]
    for step in range(length):
        monitor.global_step = step
        if trained and step in trained:
            detector.on_optimizer(_Trained(trained[step]))  # type: ignore[arg-type]
        for site, values in curves.items():
            if step < len(values):
                detector.on_losses([LossValue(values[step], site, step, step)])
        for info in infos:
            info.optimizer.param_groups[0]["lr"] = lrs[step] if lrs else 0.1
            detector.on_step_end(StepEvent(info, step + 1, step + 1, False))  # type: ignore[arg-type]
    return codes(finish(detector, monitor))


def noisy(values: list[float], scale: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [v * (1 + rng.gauss(0, scale)) for v in values]


def test_spearman_sign() -> None:
    assert spearman([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)
    assert spearman([4.0, 3.0, 2.0, 1.0]) == pytest.approx(-1.0)


# -- must stay quiet -------------------------------------------------------------------------


def test_healthy_noisy_decreasing_curve_is_quiet() -> None:
    curve = noisy([0.3 + 2.0 * math.exp(-s / 60) for s in range(300)], 0.15)
    assert not judge({SITE: curve}) & {"TD612", "TD613", "TD614"}


def test_converged_plateau_after_learning_is_quiet() -> None:
    curve = noisy([0.2 + 2.0 * math.exp(-s / 10) for s in range(400)], 0.1, seed=1)
    assert not judge({SITE: curve}) & {"TD612", "TD613", "TD614"}


def test_flat_curve_during_lr_warmup_then_learning_is_quiet() -> None:
    # 150 steps of warm-up where nothing moves, then a decrease at the working rate.
    lrs = [0.1 * min(1.0, (s + 1) / 150) for s in range(300)]
    curve = noisy([2.3] * 150 + [2.3 * math.exp(-s / 40) + 0.2 for s in range(150)], 0.05)
    assert "TD612" not in judge({SITE: curve}, lrs)


def test_gan_losses_with_two_optimizers_are_not_judged_on_trends() -> None:
    d_site, g_site = CallSite("gan.py", 40, "train", True), CallSite("gan.py", 50, "train", True)
    rng = random.Random(3)
    d_loss = [0.7 + 0.3 * rng.random() for _ in range(200)]
    g_loss = [1.0 + 0.02 * s + 0.3 * rng.random() for s in range(200)]  # rises: adversarial
    assert not judge({d_site: d_loss, g_site: g_loss}, optimizers=2) & {"TD612", "TD613"}


def test_loss_exactly_zero_is_not_constant() -> None:
    assert "TD614" not in judge({SITE: [0.5] * 5 + [0.0] * 60})


def test_single_spike_is_not_divergence() -> None:
    curve = noisy([0.3 + 2.0 * math.exp(-s / 30) for s in range(200)], 0.05)
    curve[150] = 50.0
    assert "TD613" not in judge({SITE: curve})


def test_short_runs_are_not_judged() -> None:
    assert not judge({SITE: noisy([2.3] * 40, 0.05)}) & {"TD612", "TD613"}


# -- must be found ---------------------------------------------------------------------------


def test_exactly_constant_loss_is_found() -> None:
    found = judge({SITE: [2.4, 2.35] + [2.302585092994046] * 40})
    assert "TD614" in found and "TD612" not in found


def test_loss_that_never_moves_from_its_start_is_found() -> None:
    assert "TD612" in judge({SITE: noisy([2.30] * 200, 0.05, seed=4)})


def test_diverging_loss_is_found() -> None:
    curve = noisy(
        [1.0 * math.exp(-s / 20) + 0.3 for s in range(60)]
        + [0.3 * math.exp(s / 12) for s in range(60)],
        0.05,
    )
    assert "TD613" in judge({SITE: curve})


def test_stall_after_warmup_is_found() -> None:
    lrs = [0.1 * min(1.0, (s + 1) / 50) for s in range(250)]
    assert "TD612" in judge({SITE: noisy([2.3] * 250, 0.05, seed=5)}, lrs)


# -- losses summed over episodes of varying length (policy gradient, actor-critic) ---------


def _episodes(lengths: list[int]) -> set[str]:
    """An actor-critic-shaped loop: one backward per episode of the summed step losses."""
    import torch

    import torchdoctor

    torch.manual_seed(0)
    policy = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    with torchdoctor.watch() as session:
        for length in lengths:
            terms = [policy(torch.randn(1, 4)).pow(2).sum() for _ in range(length)]
            loss = torch.stack(terms).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return session.report.codes()


def test_a_loss_over_longer_and_longer_episodes_is_not_diverging() -> None:
    lengths = [max(2, 40 - s) for s in range(40)] + [2 + 2 * s for s in range(60)]
    assert "TD613" not in _episodes(lengths)


def test_a_summed_loss_of_fixed_length_that_rises_is_still_judged() -> None:
    curve = noisy(
        [1.0 * math.exp(-s / 20) + 0.3 for s in range(60)]
        + [0.3 * math.exp(s / 12) for s in range(60)],
        0.05,
    )
    monitor = FakeMonitor()
    detector = attach(LossDynamics(), monitor)
    import torch

    for step, value in enumerate(curve):
        loss = torch.stack([torch.tensor(value / 4, requires_grad=True)] * 4).sum()
        detector.on_backward(BackwardEvent(loss, SITE, step, step, None))
        detector.on_losses([LossValue(value, SITE, step, step)])
    assert "TD613" in codes(finish(detector, monitor))


# -- outlier batches, short runs (the false alarms of real scripts) ------------------------


def _outlier_batches(steps: int, seed: int = 0) -> list[float]:
    """A regression learning well, 60% of whose batches hold a corrupted label or two:
    those batches' losses are 100x the others, at random."""
    rng = random.Random(seed)
    curve = []
    for s in range(steps):
        clean = 0.2 + 2.0 * math.exp(-s / 40)
        curve.append(
            clean * (1 + 0.2 * rng.random()) + (50 * rng.random() if rng.random() < 0.6 else 0)
        )
    return curve


def test_outlier_batches_of_a_learning_run_are_not_divergence() -> None:
    for seed in range(5):
        assert "TD613" not in judge({SITE: _outlier_batches(300, seed)})


def test_a_rare_burst_of_outliers_at_the_end_is_not_divergence() -> None:
    curve = noisy([0.3 + 2.0 * math.exp(-s / 30) for s in range(200)], 0.05)
    for s in range(170, 200, 2):
        curve[s] = 40.0
    assert "TD613" not in judge({SITE: curve})


def test_divergence_under_outlier_batches_is_still_found() -> None:
    rng = random.Random(7)
    curve = [
        v + (50 * rng.random() if rng.random() < 0.3 else 0)
        for v in [1.0 * math.exp(-s / 20) + 0.3 for s in range(100)]
        + [0.3 * math.exp(s / 15) for s in range(80)]
    ]
    assert "TD613" in judge({SITE: curve})


def test_a_short_run_whose_every_loss_is_the_same_is_constant() -> None:
    assert "TD614" in judge({SITE: [0.6931471805599453] * 16})


def test_a_short_run_that_moves_once_is_not_constant() -> None:
    assert "TD614" not in judge({SITE: [0.7] + [0.6931471805599453] * 15})
    assert "TD614" not in judge({SITE: [0.6931471805599453] * 5})


# -- backward passes that no optimizer step follows ------------------------------------------


def _fisher_and_training(lr: float) -> set[tuple[str, int]]:
    """A training loop that, every few steps, estimates an EWC-style Fisher information:
    one backward pass per example in eval mode, with no optimizer step after them."""
    import torch
    from torch import nn

    import torchdoctor

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))

    def estimate_fisher() -> None:
        model.eval()
        for i in torch.randperm(64)[:16].tolist():
            model.zero_grad()
            label = torch.randint(0, 4, (1,))
            loss = nn.functional.cross_entropy(model(x[i : i + 1]), label)
            loss.backward()
        model.train()

    with torchdoctor.watch() as session:
        for step in range(150):
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if step % 10 == 0:
                estimate_fisher()
    return {(f.code, f.location.line or 0) for f in session.report.findings}


def test_a_fisher_estimate_that_no_step_follows_is_no_training_curve() -> None:
    found = _fisher_and_training(lr=0.1)
    assert not {code for code, _ in found} & {"TD612", "TD613", "TD614"}


def test_a_training_loss_that_cannot_move_beside_it_is_still_found() -> None:
    found = _fisher_and_training(lr=0.0)  # the training loss is exactly constant
    assert "TD614" in {code for code, _ in found}


# -- training phases: an optimizer over parameters no optimizer held before -----------------


def _two_phases(second: list[float]) -> list[float]:
    """Pre-training to a low loss, then a new head's phase starting from scratch."""
    first = noisy([2.0 * math.exp(-s / 15) + 0.02 for s in range(120)], 0.05)
    return first + second


def _transfer() -> set[str]:
    """A two-stage transfer script of the variants set (``benchmarks/variants``): pre-train
    an encoder and head, then a new head on a shifted task, the encoder frozen. The second
    phase's loss starts and stays far above the first's end."""
    import importlib.util
    from pathlib import Path

    import torchdoctor

    path = Path(__file__).resolve().parents[3] / (
        "benchmarks/variants/cases/freeze_helper_sets_module_attr/fixed.py"
    )
    spec = importlib.util.spec_from_file_location("two_stage_transfer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with torchdoctor.watch() as session:
        module.main()
    assert session.report is not None
    return codes(session.report)


def test_a_new_heads_phase_starting_high_is_not_divergence(monkeypatch) -> None:
    assert not _transfer() & {"TD612", "TD613"}
    monkeypatch.setattr(LossDynamics, "on_optimizer", lambda self, optimizer: None)
    assert "TD613" in _transfer()  # judged as one curve, the jump read as a divergence


def test_an_optimizer_rebuilt_over_the_same_parameters_keeps_one_curve() -> None:
    curve = noisy(
        [1.0 * math.exp(-s / 20) + 0.3 for s in range(60)]
        + [0.3 * math.exp(s / 12) for s in range(60)],
        0.05,
    )
    rebuilt = {step: (1, 2, 3) for step in range(0, 120, 20)}  # one per "epoch"
    assert "TD613" in judge({SITE: curve}, trained=rebuilt)


def test_a_phase_that_diverges_is_still_found() -> None:
    second = noisy(
        [0.8 * math.exp(-s / 20) + 0.3 for s in range(60)]
        + [0.3 * math.exp(s / 12) for s in range(60)],
        0.05,
        seed=3,
    )
    assert "TD613" in judge({SITE: _two_phases(second)}, trained={0: (1, 2), 120: (3,)})
