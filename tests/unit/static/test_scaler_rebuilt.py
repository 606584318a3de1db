"""TD627 grad-scaler-rebuilt-in-loop: a loss scale started over on every training step."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import assert_marked, lint_findings


@pytest.mark.parametrize(
    "build",
    [
        "torch.amp.GradScaler('cuda')",
        "torch.cuda.amp.GradScaler()",
        "GradScaler(init_scale=1024)",
        "amp.GradScaler(enabled=use_amp)",
    ],
)
def test_a_scaler_built_in_the_step_loop_is_flagged(build: str) -> None:
    """TorchRL's expert-iteration script builds its scaler inside the batch loop, where
    the same pass scales the loss and steps through it."""
    source = f"""
    import torch
    from torch.cuda import amp
    from torch.amp import GradScaler
    def train(model, optimizer, loader, use_amp):
        for epoch in range(3):
            for batch in loader:
                scaler = {build}  # expect: TD627
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = model(batch).mean()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """
    assert_marked(source, "TD627")
    (found,) = lint_findings(source, "TD627")
    assert "every pass of the loop at line 7" in found.message
    assert "every step is skipped" in found.message and found.fix_hint


def test_a_scaler_built_under_a_condition_in_the_loop_is_flagged() -> None:
    source = """
    import torch
    def train(model, optimizer, loader, cfg):
        for step, batch in enumerate(loader):
            loss = model(batch).mean() / cfg.accumulate
            if cfg.fp16:
                scaler = torch.amp.GradScaler(enabled=True)  # expect: TD627
                scaler.scale(loss).backward()
            else:
                loss.backward()
            if (step + 1) % cfg.accumulate == 0:
                if cfg.fp16:
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    optimizer.step()
                optimizer.zero_grad()
    """
    assert_marked(source, "TD627")


def test_a_step_helper_that_builds_its_own_scaler_is_flagged() -> None:
    source = """
    import torch
    class Trainer:
        def step(self, batch):
            self.grad_scaler = torch.amp.GradScaler("cuda")  # expect: TD627
            loss = self.model(batch).mean()
            self.grad_scaler.scale(loss).backward()
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
            self.optimizer.zero_grad()
        def fit(self, loader):
            for batch in loader:
                self.step(batch)
    """
    assert_marked(source, "TD627")
    (found,) = lint_findings(source, "TD627")
    assert "every call of `step()`, which the loop at line 12" in found.message


def test_scalers_that_live_across_steps_are_quiet() -> None:
    """One scaler per epoch or per fold adapts within it; a disabled one holds no scale;
    one built before the loop is the fix."""
    source = """
    import torch
    def fit_fold(model, optimizer, scaler, loader):
        for batch in loader:
            scaler.scale(model(batch).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
    def cross_validate(folds):
        for loader in folds:
            model = Net()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cuda")
            fit_fold(model, optimizer, scaler, loader)
    def per_epoch(model, optimizer, loader):
        for epoch in range(3):
            scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                scaler.scale(model(batch).mean()).backward()
                scaler.step(optimizer)
                scaler.update()
    def disabled(model, optimizer, loader):
        for batch in loader:
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            scaler.scale(model(batch).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
    def once(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            scaler.scale(model(batch).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
    def helper_with_its_own_loop(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            scaler.scale(model(batch).mean()).backward()
            scaler.step(optimizer)
            scaler.update()
    for stage in range(2):
        helper_with_its_own_loop(model, optimizer, loader)
    """
    assert_marked(source, "TD627")


def test_a_scaler_built_in_a_loop_that_does_not_train_is_quiet() -> None:
    source = """
    import torch
    def configs(names):
        for name in names:
            scaler = torch.amp.GradScaler("cuda")
            scaler.update()
    """
    assert_marked(source, "TD627")
