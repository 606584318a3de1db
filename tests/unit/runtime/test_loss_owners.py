"""One loss curve per optimizer (runtime/detectors/owners.py), and TD215/TD216 judging each
optimizer by its own loss when several optimizers alternate (a GAN's two losses)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from torchdoctor.runtime.detectors.owners import LossOwners

D, G = 101, 202  # optimizer keys


def alternating(iterations: int, losses: dict[int, float]) -> LossOwners:
    """A GAN's loop: the discriminator's backward and step, then the generator's."""
    owners = LossOwners()
    index = 0
    for _ in range(iterations):
        for key in (D, G):
            owners.backward(index)
            owners.add(index, losses[key])
            owners.step(key)
            index += 1
    return owners


def test_one_optimizer_keeps_every_loss_in_the_order_read() -> None:
    owners = LossOwners()
    for index, value in enumerate([3.0, math.nan, 2.0, 1.0]):
        owners.backward(index)
        owners.step(D)
        owners.add(index, value)
    owners.backward(4)  # after the last step
    owners.add(4, 0.5)
    assert list(owners.curve(D)) == [3.0, math.inf, 2.0, 1.0, 0.5]
    assert list(owners.curve(G)) == []


def test_alternating_optimizers_get_their_own_losses() -> None:
    owners = alternating(5, {D: 0.7, G: 2.0})
    assert list(owners.curve(D)) == [0.7] * 5
    assert list(owners.curve(G)) == [2.0] * 5


def test_several_steps_of_one_optimizer_per_step_of_the_other() -> None:
    """WGAN: five critic steps per generator step; losses read in batches, out of order."""
    owners = LossOwners()
    index, read = 0, []
    for _ in range(4):
        for key in (D, D, D, D, D, G):
            owners.backward(index)
            read.append((index, 1.0 if key == D else 5.0))
            owners.step(key)
            index += 1
    for index, value in reversed(read):  # the order of reading does not decide ownership
        owners.add(index, value)
    assert list(owners.curve(D)) == [1.0] * 20
    assert list(owners.curve(G)) == [5.0] * 4


def test_optimizers_stepping_on_one_backward_pass_share_every_loss() -> None:
    """An encoder and a decoder with optimizers of their own, one loss for both."""
    owners = LossOwners()
    for index in range(6):
        owners.backward(index)
        owners.add(index, float(index))
        owners.step(D)
        owners.step(G)
    assert list(owners.curve(D)) == list(owners.curve(G)) == [float(i) for i in range(6)]


def test_a_second_optimizer_that_joins_later_splits_only_the_later_losses() -> None:
    owners = LossOwners()
    for index in range(4):  # pre-training: one optimizer
        owners.backward(index)
        owners.add(index, 1.0)
        owners.step(D)
    for index in range(4, 8):  # then both alternate
        key = D if index % 2 == 0 else G
        owners.backward(index)
        owners.add(index, 1.0 if key == D else 9.0)
        owners.step(key)
    assert list(owners.curve(D)) == [1.0] * 6
    assert list(owners.curve(G)) == [9.0] * 2


# -- the detectors, watched --------------------------------------------------------------------

torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp  # noqa: E402

CODES = {"TD215", "TD216"}


def deep_sigmoid() -> Any:
    layers: list[Any] = [nn.Linear(8, 32), nn.Sigmoid()]
    for _ in range(10):
        layers += [nn.Linear(32, 32), nn.Sigmoid()]
    return nn.Sequential(*layers, nn.Linear(32, 3))


def two_optimizers(first: Any, second: Any, steps: int) -> torchdoctor.Report:
    """Alternate two independent training problems, each with an optimizer of its own:
    the first classifies (cross-entropy, Adam), the second fits a target of scale 100
    (mean squared error, SGD), whose loss falls by orders of magnitude."""
    first_opt = torch.optim.Adam(first.parameters(), lr=1e-3)
    second_opt = torch.optim.SGD(second.parameters(), lr=0.05)
    x, target = torch.randn(32, 8), 100 * torch.ones(32, 1)
    with torchdoctor.watch(sample_every=2) as watched:
        for _ in range(steps):
            inputs, labels = batch()
            first_opt.zero_grad()
            nn.functional.cross_entropy(first(inputs), labels).backward()
            first_opt.step()
            second_opt.zero_grad()
            nn.functional.mse_loss(second(x), target).backward()
            second_opt.step()
    return watched.report


@pytest.mark.needs_torch
def test_a_stalled_optimizer_is_judged_by_its_own_loss_next_to_a_falling_one() -> None:
    """The deep sigmoid stack's early layers lag (Adam) and its loss does not improve; the
    other optimizer's loss falls a hundredfold. One curve for both fell: TD215 was missed."""
    torch.manual_seed(0)
    report = two_optimizers(deep_sigmoid(), nn.Linear(8, 1), 40)
    [found] = report.by_code("TD215")
    assert found.evidence["optimizer"] == "Adam"
    assert found.evidence["loss_falls"] is False
    assert "the loss does not improve" in found.message


@pytest.mark.needs_torch
def test_two_healthy_optimizers_alternating_are_quiet() -> None:
    torch.manual_seed(0)
    assert not two_optimizers(mlp(), nn.Linear(8, 1), 40).codes() & CODES


@pytest.mark.needs_torch
def test_a_small_gan_whose_losses_behave_is_quiet() -> None:
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    g_opt = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(discriminator.parameters(), lr=1e-3, betas=(0.5, 0.999))
    bce = nn.functional.binary_cross_entropy_with_logits
    with torchdoctor.watch(sample_every=2) as watched:
        for _ in range(60):
            real = torch.randn(32, 2) * 0.5 + torch.tensor([2.0, -1.0])
            fake = generator(torch.randn(32, 4))
            d_opt.zero_grad()
            d_loss = bce(discriminator(real), torch.ones(32, 1)) + bce(
                discriminator(fake.detach()), torch.zeros(32, 1)
            )
            d_loss.backward()
            d_opt.step()
            g_opt.zero_grad()
            bce(discriminator(fake), torch.ones(32, 1)).backward()
            g_opt.step()
    assert not watched.report.codes() & CODES


@pytest.mark.needs_torch
def test_an_encoder_and_a_decoder_stepping_on_one_loss_are_quiet() -> None:
    torch.manual_seed(0)
    encoder, decoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU()), nn.Linear(16, 3)
    optimizers = [
        torch.optim.Adam(encoder.parameters(), lr=1e-3),
        torch.optim.Adam(decoder.parameters(), lr=1e-3),
    ]
    with torchdoctor.watch(sample_every=2) as watched:
        for _ in range(40):
            inputs, labels = batch()
            for optimizer in optimizers:
                optimizer.zero_grad()
            nn.functional.cross_entropy(decoder(encoder(inputs)), labels).backward()
            for optimizer in optimizers:
                optimizer.step()
    assert not watched.report.codes() & CODES
