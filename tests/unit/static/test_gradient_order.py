"""TD616 clip-after-step and TD201 for two optimizers (zero_grad on the other one)."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes

HEADER = """
import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_
"""


def test_clip_after_step_in_a_loop_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        clip_grad_norm_(model.parameters(), 1.0)  # expect: TD616
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)  # expect: TD616
""",
        "TD616",
    )


def test_clip_after_step_across_helper_methods_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
class Trainer:
    def __init__(self, model):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def clip(self):
        clip_grad_norm_(self.model.parameters(), 1.0)  # expect: TD616

    def step(self, x):
        self.model(x).sum().backward()
        self.opt.step()
        self.clip()
        self.opt.zero_grad()
""",
        "TD616",
    )


def test_clip_between_backward_and_step_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, optimizer, scaler):
    for x, y in loader:
        optimizer.zero_grad()
        loss = model(x).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
""",
            "TD616",
        )
        == []
    )


def test_clip_after_a_later_backward_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def gan(G, D, loader, opt_d, opt_g):
    for x in loader:
        opt_d.zero_grad()
        D(x).mean().backward()
        opt_d.step()
        opt_g.zero_grad()
        D(G(x)).mean().backward()
        clip_grad_norm_(G.parameters(), 1.0)
        opt_g.step()
""",
            "TD616",
        )
        == []
    )


def test_clip_in_the_other_branch_or_without_training_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, optimizer, use_clip):
    for x, y in loader:
        optimizer.zero_grad()
        model(x).sum().backward()
        if use_clip:
            clip_grad_norm_(model.parameters(), 1.0)
        else:
            optimizer.step()

def report(model, optimizer):
    optimizer.step()
    return clip_grad_norm_(model.parameters(), float("inf"))
""",
            "TD616",
        )
        == []
    )


def test_second_optimizer_never_cleared_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def gan(G, D, loader):
    opt_g = torch.optim.Adam(G.parameters())
    opt_d = torch.optim.Adam(D.parameters())
    for x in loader:
        opt_d.zero_grad()
        D(x).mean().backward()
        opt_d.step()
        D(G(x)).mean().backward()
        opt_g.step()  # expect: TD201
""",
        "TD201",
    )


def test_both_optimizers_cleared_or_modules_cleared_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def gan(G, D, loader):
    opt_g = torch.optim.Adam(G.parameters())
    opt_d = torch.optim.Adam(D.parameters())
    for x in loader:
        opt_d.zero_grad()
        D(x).mean().backward()
        opt_d.step()
        opt_g.zero_grad()
        D(G(x)).mean().backward()
        opt_g.step()

def dcgan(netG, netD, loader):
    opt_g = torch.optim.Adam(netG.parameters())
    opt_d = torch.optim.Adam(netD.parameters())
    for x in loader:
        netD.zero_grad()
        netD(x).mean().backward()
        opt_d.step()
        netG.zero_grad()
        netD(netG(x)).mean().backward()
        opt_g.step()
""",
            "TD201",
        )
        == []
    )


def test_optimizers_sharing_or_hiding_their_parameters_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def shared(model, loader):
    opt_a = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_b = torch.optim.Adam(model.parameters())
    for x in loader:
        model(x).sum().backward()
        opt_a.step()
        opt_b.step()
        opt_b.zero_grad()

def passed_in(model, loader, opt_a, opt_b):
    for x in loader:
        model(x).sum().backward()
        opt_a.step()
        opt_b.step()
        opt_b.zero_grad()

def over_all(G, D, loader):
    opt_g = torch.optim.Adam(G.parameters())
    opt_d = torch.optim.Adam(D.parameters())
    for x in loader:
        for opt in (opt_g, opt_d):
            opt.zero_grad()
        D(G(x)).mean().backward()
        opt_d.step()
        opt_g.step()
""",
            "TD201",
        )
        == []
    )


def test_accelerator_clip_after_step_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, loader, optimizer, accelerator):
    for x, y in loader:
        accelerator.backward(model(x).sum())
        optimizer.step()
        accelerator.clip_grad_norm_(model.parameters(), 1.0)  # expect: TD616
        optimizer.zero_grad()
""",
        "TD616",
    )


def test_accelerator_clip_before_step_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def train(model, loader, optimizer, accelerator):
    for x, y in loader:
        accelerator.backward(model(x).sum())
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
""",
            "TD616",
        )
        == []
    )


DISPATCHED = """
import torch
class Clip:
    def {hook}(self, trainer):
        torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0){mark}
class Trainer:
    def __init__(self, model, callbacks):
        self.model, self.callbacks = model, callbacks
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    def _emit(self, event):
        for callback in self.callbacks:
            getattr(callback, event)(self)
    def _batch_end(self):
        for callback in self.callbacks:
            callback.{hook}(self)
    def batch(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        {after_backward}
        self.optimizer.step()
        {after_step}
"""


@pytest.mark.parametrize(
    "hook, after_backward, after_step, flagged",
    [
        ("on_batch_end", "pass", 'self._emit("on_batch_end")', True),
        ("on_batch_end", "pass", "self._batch_end()", True),  # callback.on_batch_end(self)
        ("on_after_backward", 'self._emit("on_after_backward")', "pass", False),
        ("on_batch_end", 'self._emit("on_batch_end")', "pass", False),  # emitted before the step
        ("on_batch_end", "pass", "self._emit(event_name)", False),  # which event is unknown
        ("batch_end", "pass", "self._batch_end()", False),  # not a hook name: not followed
    ],
)
def test_td616_follows_callbacks_dispatched_by_event_name(
    hook: str, after_backward: str, after_step: str, flagged: bool
) -> None:
    mark = "  # expect: TD616" if flagged else ""
    source = DISPATCHED.format(
        hook=hook, after_backward=after_backward, after_step=after_step, mark=mark
    )
    assert_marked(source, "TD616")
