"""TD209 loss-does-not-require-grad, lint's half: the flag set by hand before backward()."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings


def test_the_flag_set_on_the_loss_before_its_backward_is_flagged() -> None:
    source = """
        import torch

        def train(model, batches, optimizer, scaler, loss_fn):
            for x, y in batches:
                loss = loss_fn(model(x), y)
                loss.requires_grad = True  # expect: TD209
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        def train_amp(model, batches, optimizer, scaler, loss_fn):
            for x, y in batches:
                loss = torch.tensor(loss_fn(model(x), y).item())
                loss.requires_grad_(True)  # expect: TD209
                scaler.scale(loss).backward()
                scaler.step(optimizer)
        """
    assert_marked(source, "TD209")
    found = lint_findings(source, "TD209")[0]
    assert "before `backward()` at line 9" in found.message


def test_inputs_rebound_losses_and_other_tensors_are_quiet() -> None:
    source = """
        import torch

        def adversarial(model, x, y, loss_fn):
            x.requires_grad = True
            loss = loss_fn(model(x), y)
            loss.backward()
            return x.grad.sign()

        def penalty(model, x, loss_fn):
            total = torch.zeros(())
            total.requires_grad_()
            total = total + loss_fn(model(x))
            total.backward()

        def disabled(loss):
            loss.requires_grad = False
            loss.backward()
        """
    assert_marked(source, "TD209")
