"""TD618 accumulated-loss-not-scaled."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings

HEADER = """
import torch
from torch import nn
"""


def test_unscaled_accumulation_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
def train(model, loader, optimizer, accum_steps):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # expect: TD618
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
""",
        "TD618",
    )


def test_unscaled_accumulation_in_a_step_method_is_flagged_with_a_fix() -> None:
    source = (
        HEADER
        + """
class Trainer:
    def step(self, batch, index):
        loss = self.criterion(self.model(batch[0]), batch[1])
        loss.backward()
        if not (index + 1) % 8:
            self.optimizer.step()
            self.optimizer.zero_grad()
"""
    )
    found = lint_findings(source, "TD618")
    assert [(f.code, f.location.line) for f in found] == [("TD618", 8)]
    assert found[0].fix is not None and found[0].fix.edits[0].replacement == "(loss / 8)"


def test_scaled_losses_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def divided(model, loader, optimizer, k):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y) / k
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()

def divided_later(model, loader, optimizer, k):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        loss /= k
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()

def scaled_by_amp(model, loader, optimizer, scaler, k):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss / k).backward()
        if (i + 1) % k == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
""",
            "TD618",
        )
        == []
    )


def test_not_accumulation_or_unknown_losses_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def every_step(model, loader, optimizer):
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if i % 1 == 0:
            optimizer.step()

def cleared_every_iteration(model, loader, optimizer, k):
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        if (i + 1) % k == 0:
            optimizer.step()

def model_loss(model, loader, optimizer, k):
    for i, (x, y) in enumerate(loader):
        logits, loss = model(x, y)
        loss.backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
""",
            "TD618",
        )
        == []
    )


def test_backward_in_a_helper_is_flagged_without_an_edit() -> None:
    found = lint_findings(
        HEADER
        + """
def train_step(model, batch):
    x, y = batch
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()

def fit(model, loader, opt, k):
    for i, batch in enumerate(loader):
        train_step(model, batch)
        if (i + 1) % k == 0:
            opt.step()
            opt.zero_grad()
""",
        "TD618",
    )
    assert [(f.code, f.location.line) for f in found] == [("TD618", 8)]
    assert found[0].fix is None


def test_helper_that_scales_its_loss_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
def compute_loss(model, batch, k):
    x, y = batch
    return nn.functional.mse_loss(model(x), y) / k

def fit(model, loader, opt, k):
    for i, batch in enumerate(loader):
        loss = compute_loss(model, batch, k)
        loss.backward()
        if (i + 1) % k == 0:
            opt.step()
            opt.zero_grad()
""",
            "TD618",
        )
        == []
    )


SPLIT_ACCUMULATION = """
import torch
class Trainer:
    def __init__(self, model, k):
        self.model, self.k, self.n = model, k, 0
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    def backward(self, loss):
        {backward}{mark}
    def step_if_ready(self):
        self.n += 1
        if self.n % self.k == 0:
            self.optimizer.step()
            {clear}
    def epoch(self, loader):
        for x, y in loader:
            self.backward(((self.model(x) - y) ** 2).mean(){scale})
            self.step_if_ready()
"""


@pytest.mark.parametrize(
    "backward, clear, scale, flagged",
    [
        ("loss.backward()", "self.optimizer.zero_grad()", "", True),
        ("(loss / self.k).backward()", "self.optimizer.zero_grad()", "", False),
        ("loss.backward()", "self.optimizer.zero_grad()", " / self.k", False),  # the body scales
        ("loss.backward()", "pass", "", False),  # never cleared: TD201's finding, not this one
    ],
)
def test_td618_accumulation_split_into_helpers(
    backward: str, clear: str, scale: str, flagged: bool
) -> None:
    mark = "  # expect: TD618" if flagged else ""
    source = SPLIT_ACCUMULATION.format(backward=backward, clear=clear, scale=scale, mark=mark)
    assert_marked(source, "TD618")


@pytest.mark.parametrize(
    ("backward", "flagged"),
    [
        # Open-Sora: ColossalAI's booster takes the loss by keyword, divided there
        ("booster.backward(loss=(loss / accum_steps), optimizer=optimizer)", False),
        ("booster.backward(loss / accum_steps, optimizer)", False),
        # the same call with the loss not divided
        ("booster.backward(loss=loss, optimizer=optimizer)", True),
        ("booster.backward(loss, optimizer)", True),
    ],
)
def test_td618_reads_the_loss_a_booster_is_given(backward: str, flagged: bool) -> None:
    mark = "  # expect: TD618" if flagged else ""
    assert_marked(
        HEADER
        + f"""
def train(model, loader, optimizer, booster, accum_steps):
    for i, (x, y) in enumerate(loader):
        loss = nn.functional.mse_loss(model(x), y)
        {backward}{mark}
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
""",
        "TD618",
    )
