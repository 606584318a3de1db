"""Gradients never cleared (TD201) and steps without gradients (TD210), under watch()."""

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
    model = mlp()
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


# -- TD201: found ----------------------------------------------------------------------------


def test_never_cleared_is_found_at_the_step_line() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(30):
            x, y = batch()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()  # marker: uncleared-step
    [found] = w.report.by_code("TD201")
    assert found.location.path == HERE
    assert found.location.line == line_of("marker: uncleared-step")
    assert "SGD" in found.message and "x" in found.message  # names the optimizer, the growth
    assert found.evidence["uncleared_step_pairs"] >= 2
    assert "zero_grad" in found.fix_hint


def test_clearing_only_every_other_step_is_found() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for index in range(30):
            step(model, optimizer, clear=index % 2 == 0)
    assert w.report.by_code("TD201")


# -- TD201: quiet ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "how", ["optimizer-none", "optimizer-zero", "model", "grad-none", "inplace-zero", "data-zero"]
)
def test_every_way_of_clearing_is_recognised(how: str) -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(20):
            if how == "optimizer-none":
                optimizer.zero_grad(set_to_none=True)
            elif how == "optimizer-zero":
                optimizer.zero_grad(set_to_none=False)
            elif how == "model":
                model.zero_grad()
            else:
                for p in model.parameters():
                    if how == "grad-none":
                        p.grad = None
                    elif p.grad is not None and how == "inplace-zero":
                        p.grad.zero_()
                    elif p.grad is not None:
                        p.grad.data.zero_()
            x, y = batch()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    assert not w.report.by_code("TD201")


def test_gradient_accumulation_is_not_a_bug() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for index in range(80):
            x, y = batch()
            (nn.functional.cross_entropy(model(x), y) / 4).backward()
            if (index + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
    assert not w.report.by_code("TD201")


def test_gan_with_two_optimizers_is_quiet() -> None:
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
    discriminator = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4)
    bce = nn.BCEWithLogitsLoss()
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(40):
            real, noise = torch.randn(16, 8) + 2, torch.randn(16, 4)
            discriminator.zero_grad()
            fake = generator(noise)
            loss_d = bce(discriminator(real), torch.ones(16, 1)) + bce(
                discriminator(fake.detach()), torch.zeros(16, 1)
            )
            loss_d.backward()
            opt_d.step()
            generator.zero_grad()
            # The generator's backward goes through D and leaves gradients in D's .grad
            # until D's next zero_grad(): correct, and must not look like TD201.
            bce(discriminator(fake), torch.ones(16, 1)).backward()
            opt_g.step()
    assert not w.report.codes() & {"TD201", "TD210", "TD612", "TD613"}


def test_lbfgs_with_a_closure_is_quiet() -> None:
    model, _ = seeded()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=3)
    x, y = batch()

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        return loss

    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(10):
            optimizer.step(closure)
    assert not w.report.codes() & {"TD201", "TD210"}


def wgan(
    n_critic: int, clear_generator: str = "optimizer-none", clear_critic: bool = True
) -> torchdoctor.Report:
    """WGAN-style training: ``n_critic`` critic steps, then one generator step.

    The critic's backward passes never reach the generator (its samples are made under
    ``no_grad``), so the generator's ``.grad`` keeps its last step's values through them.
    """
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    opt_g = torch.optim.RMSprop(generator.parameters(), lr=5e-4)
    opt_c = torch.optim.RMSprop(critic.parameters(), lr=5e-4)
    with torchdoctor.watch(sample_every=1) as w:
        for _ in range(12):
            critic.requires_grad_(True)
            for _ in range(n_critic):
                real = torch.randn(32, 2) + 1
                with torch.no_grad():
                    fake = generator(torch.randn(32, 4))
                if clear_critic:
                    opt_c.zero_grad()
                (critic(fake).mean() - critic(real).mean()).backward()
                opt_c.step()
            critic.requires_grad_(False)
            if clear_generator == "optimizer-none":
                opt_g.zero_grad()
            elif clear_generator == "optimizer-zero":
                opt_g.zero_grad(set_to_none=False)
            elif clear_generator == "data-zero":
                for p in generator.parameters():
                    if p.grad is not None:
                        p.grad.data.zero_()  # invisible to version counters
            (-critic(generator(torch.randn(32, 4))).mean()).backward()
            opt_g.step()
    return w.report


@pytest.mark.parametrize("n_critic", [2, 4, 5])
@pytest.mark.parametrize("how", ["optimizer-none", "optimizer-zero", "data-zero"])
def test_critic_steps_between_generator_steps_are_quiet(n_critic: int, how: str) -> None:
    assert not wgan(n_critic, how).by_code("TD201")


def test_generator_never_cleared_between_critic_steps_is_found() -> None:
    [found] = wgan(5, clear_generator="never").by_code("TD201")
    assert found.evidence["optimizer"] == "RMSprop #2"  # the generator's, not the critic's
    assert found.evidence["stale_parameters"]


def test_critic_never_cleared_is_found() -> None:
    [found] = wgan(3, clear_critic=False).by_code("TD201")
    assert found.evidence["optimizer"] == "RMSprop"


def test_accumulation_cleared_in_place_before_the_first_micro_batch_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch(sample_every=1) as w:
        for index in range(64):
            if index % 8 == 0:
                optimizer.zero_grad(set_to_none=False)
            x, y = batch()
            (nn.functional.cross_entropy(model(x), y) / 8).backward()
            if index % 8 == 7:
                optimizer.step()
    assert not w.report.by_code("TD201")


# -- TD210 -----------------------------------------------------------------------------------


def test_step_without_backward_is_found() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(10):
            optimizer.zero_grad()
            x, y = batch()
            nn.functional.cross_entropy(model(x), y)  # the backward() call was forgotten
            optimizer.step()  # marker: step-without-backward
    [found] = w.report.by_code("TD210")
    assert found.location.line == line_of("marker: step-without-backward")
    assert "None" in found.message


def test_zero_grad_between_backward_and_step_is_found() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(10):
            x, y = batch()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.zero_grad(set_to_none=False)
            optimizer.step()
    [found] = w.report.by_code("TD210")
    assert "exactly zero" in found.message
    assert not w.report.by_code("TD201")  # cleared too early, not never


def test_one_step_before_training_is_not_flagged() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        optimizer.step()  # a lone step to silence the scheduler warning: useless, not a bug
        for _ in range(10):
            step(model, optimizer)
    assert not w.report.by_code("TD210")


def test_ordinary_training_is_quiet() -> None:
    model, optimizer = seeded()
    with torchdoctor.watch() as w:
        for _ in range(30):
            step(model, optimizer)
    assert not w.report.codes() & {"TD201", "TD210"}
