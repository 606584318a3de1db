"""TD912 state-dict-snapshot-aliased."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings

LOOP = """
import copy
import torch
from torch import nn

def train_epoch(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()

def fit(model: nn.Module, loader, val, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    best, best_state = float("inf"), None
    for epoch in range(epochs):
        train_epoch(model, loader, optimizer)
        loss = validate(model, val)
        if loss < best:
            best = loss
{snapshot}
{after}
"""


def td912(snapshot: str, after: str = "    model.load_state_dict(best_state)") -> None:
    assert_marked(LOOP.format(snapshot=snapshot, after=after), "TD912")


def test_a_snapshot_restored_after_the_loop_is_flagged() -> None:
    td912("            best_state = model.state_dict()  # expect: TD912")
    (found,) = lint_findings(
        LOOP.format(
            snapshot="            best_state = model.state_dict()",
            after="    torch.save(best_state, 'best.pt')",
        ),
        "TD912",
    )
    assert found.evidence == {"read_line": 21, "loop_line": 15}
    assert "after the loop at line 15" in found.message
    assert "copy.deepcopy(model.state_dict())" in found.fix_hint


def test_shallow_copies_and_returns_are_flagged() -> None:
    td912("            best_state = dict(model.state_dict())  # expect: TD912")
    td912("            best_state = model.state_dict().copy()  # expect: TD912")
    td912(
        "            best_state = copy.copy(model.state_dict())  # expect: TD912",
        "    return {'model': best_state}",
    )


def test_a_checkpoint_dict_saved_on_later_passes_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        def fit(generator: nn.Module, loader, optimizer, checkpoint):
            for step, batch in enumerate(loader):
                optimizer.zero_grad()
                generator(batch).sum().backward()
                optimizer.step()
                if step % 100 == 0:
                    score = evaluate(generator)
                    if score < checkpoint["best_score"]:
                        checkpoint["best_state"] = generator.state_dict()  # expect: TD912
                    checkpoint["state"] = generator.state_dict()
                    torch.save(checkpoint, "ckpt.pt")
        """
    assert_marked(source, "TD912")


def test_an_attribute_restored_by_another_method_is_flagged() -> None:
    source = """
        import torch

        class Trainer:
            def fit(self, epochs):
                for epoch in range(epochs):
                    for x, y in self.loader:
                        self.optimizer.zero_grad()
                        self.model(x).sum().backward()
                        self.optimizer.step()
                    if self.validate() > self.best:
                        self.best_state = self.model.state_dict()  # expect: TD912

            def restore(self):
                self.model.load_state_dict(self.best_state)
        """
    assert_marked(source, "TD912")


def test_copies_immediate_saves_and_early_stops_are_quiet() -> None:
    td912("            best_state = copy.deepcopy(model.state_dict())")
    td912("            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}")
    td912(
        "            best_state = model.state_dict()\n"
        "            torch.save(best_state, 'best.pt')",
        "    print(best)",
    )
    td912(
        "            best_state = model.state_dict()\n            break",
    )


def test_snapshots_outside_training_or_taken_every_pass_are_quiet() -> None:
    source = """
        import torch
        from torch import nn

        def average(models: list[nn.Module], model: nn.Module):
            states = []
            for m in models:
                if m.training:
                    states.append(m.state_dict())
                    kept = m.state_dict()
            model.load_state_dict(kept)

        def fit(model: nn.Module, loader, optimizer, epochs):
            for epoch in range(epochs):
                for x in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                last = model.state_dict()
            torch.save(last, "last.pt")

        def export(optimizer, loader, scaler, epochs):
            for epoch in range(epochs):
                for x in loader:
                    optimizer.step()
                if epoch == 0:
                    first = optimizer.state_dict()
            torch.save(first, "opt.pt")
        """
    assert_marked(source, "TD912")
