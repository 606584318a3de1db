"""TD703 host-sync-in-hot-loop and TD704 compile-in-loop."""

from __future__ import annotations

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.findings import Confidence, Severity

# --- TD703 ------------------------------------------------------------------------------

HOT_LOOP = """
import torch

def train(model, loader, optimizer, criterion):
    step = 0
    for epoch in range(10):
        total = torch.zeros(())
        for x, y in loader:
            optimizer.zero_grad()
            logits = model(x)
            loss = criterion(logits, y)
            loss.backward()
            optimizer.step()
{inner}
            step += 1
{outer}
"""


def td703(inner: str = "", outer: str = "") -> list[tuple[str, int]]:
    return lint_codes(HOT_LOOP.format(inner=inner, outer=outer), "TD703", "TD001")


def test_item_every_step_is_flagged_as_info() -> None:
    source = HOT_LOOP.format(inner="            running = loss.item()", outer="")
    (found,) = lint_findings(source, "TD703")
    assert (found.location.line, found.severity) == (14, Severity.INFO)
    assert found.confidence is Confidence.HIGH
    assert "training loop at line 8" in found.message


def test_each_kind_of_read_back_is_flagged() -> None:
    inner = """\
            a = (logits.argmax(1) == y).sum().item()
            b = logits.detach().cpu()
            c = logits.tolist()
            print(loss)
            print(f"loss {loss:.3f}")
            d = float(loss)"""
    assert td703(inner=inner) == [("TD703", n) for n in range(14, 20)]


def test_reads_of_other_values_than_the_loss_have_medium_confidence() -> None:
    source = HOT_LOOP.format(inner="            n = logits.argmax(1).cpu()", outer="")
    (found,) = lint_findings(source, "TD703")
    assert found.confidence is Confidence.MEDIUM


def test_a_read_in_a_step_function_called_from_a_loop_is_flagged() -> None:
    source = """
    def train_step(model, batch, optimizer):
        optimizer.zero_grad()
        loss = model(batch).mean()
        loss.backward()
        optimizer.step()
        return loss.item()

    for batch in loader:
        train_step(model, batch, optimizer)
    """
    assert lint_codes(source, "TD703", "TD001") == [("TD703", 7)]


def test_periodic_logging_is_quiet() -> None:
    for guard in (
        "step % 100 == 0",
        "not step % 100",
        "step == 0",
        "(step + 1) % log_every == 0 and epoch > 1",
    ):
        inner = f"            if {guard}:\n                print(loss.item())"
        assert td703(inner=inner) == [], guard


def test_a_guard_that_holds_every_step_does_not_hide_the_read() -> None:
    inner = (
        "            if writer is not None:\n                writer.add_scalar('l', loss.item())"
    )
    assert td703(inner=inner) == [("TD703", 15)]


def test_reads_once_per_epoch_or_after_training_are_quiet() -> None:
    outer = "        print(total.item())\n    print(loss.item())"
    assert td703(outer=outer) == []


def test_printing_things_that_are_not_the_loss_is_quiet() -> None:
    inner = '            print(step)\n            print(f"step {step}")\n            n = int(step)'
    assert td703(inner=inner) == []


def test_moving_a_module_or_reading_in_an_except_block_is_quiet() -> None:
    inner = (
        "            model.cpu()\n            try:\n                pass\n"
        "            except RuntimeError:\n                print(loss.item())"
    )
    assert td703(inner=inner) == []


def test_loops_that_do_not_train_are_quiet() -> None:
    source = """
    import torch
    @torch.no_grad()
    def evaluate(model, loader):
        correct = 0
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
        return correct
    """
    assert lint_codes(source, "TD703", "TD001") == []


def test_a_function_defined_in_the_loop_runs_only_when_called() -> None:
    inner = "            def report():\n                return loss.item()"
    assert td703(inner=inner) == []


# --- TD704 ------------------------------------------------------------------------------


def td704(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD704", "TD001")


def test_recompiling_the_model_every_epoch_is_an_error() -> None:
    source = """
    import torch
    for epoch in range(10):
        model = torch.compile(model)
        model.train()
    """
    (found,) = lint_findings(source, "TD704")
    assert (found.location.line, found.severity) == (4, Severity.ERROR)
    assert "loop at line 3" in found.message and "2.13" in found.message


def test_compiling_the_same_model_anew_each_batch_is_a_warning() -> None:
    source = """
    from torch import compile as compile_model
    for x, y in loader:
        out = compile_model(model)(x)
        fast = compile_model(self.model, mode="max-autotune")
    """
    found = lint_findings(source, "TD704")
    assert [(f.location.line, f.severity) for f in found] == [
        (4, Severity.WARNING),
        (5, Severity.WARNING),
    ]


def test_compiling_before_the_loop_is_quiet() -> None:
    source = """
    import torch
    model = torch.compile(model)
    for x, y in loader:
        model(x)
    """
    assert td704(source) == []


def test_compiling_a_different_object_each_iteration_is_quiet() -> None:
    source = """
    import torch
    compiled = {}
    for name, module in models.items():
        compiled[name] = torch.compile(module)
    for lr in (1e-3, 1e-4):
        model = Net()
        model = torch.compile(model)
        train(model, lr)
    for fold in range(5):
        fast = torch.compile(Net())
    """
    assert td704(source) == []


def test_compiling_each_layer_indexed_by_the_loop_variable_is_quiet() -> None:
    """Kornia's LightGlue compiles each transformer layer's forward once:
    ``self.transformers[i].masked_forward`` names a different object on every iteration,
    as does ``layer.forward`` after ``layer = self.layers[idx]`` (XTuner). The same
    attribute without the index is the same object each time."""
    source = """
    import torch
    class Matcher:
        def compile(self, n_layers):
            for i in range(n_layers):
                self.transformers[i].masked_forward = torch.compile(
                    self.transformers[i].masked_forward, fullgraph=True
                )
            for name in self.blocks:
                self.blocks[name] = torch.compile(self.blocks[name])
            for i in range(n_layers):
                self.head = torch.compile(self.head)
            for idx in range(n_layers):
                layer = self.layers[idx]
                layer.forward = torch.compile(layer.forward)
                self.layers[idx] = layer
    """
    assert td704(source) == [("TD704", 12)]


def test_compiling_once_under_a_guard_is_quiet() -> None:
    source = """
    import torch
    compiled = None
    for epoch in range(10):
        if compiled is None:
            compiled = torch.compile(model)
        if epoch == 0:
            model = torch.compile(model)
        if not warmed_up:
            fast = torch.compile(model)
    """
    assert td704(source) == []


def test_a_compile_decorator_factory_in_a_loop_is_quiet() -> None:
    source = """
    import torch
    for mode in ("default", "reduce-overhead"):
        decorate = torch.compile(mode=mode)
    """
    assert td704(source) == []


def test_an_unrelated_compile_is_quiet() -> None:
    source = """
    import re
    for pattern in patterns:
        regex = re.compile(pattern)
        code = compile(source, "<x>", "exec")
    """
    assert td704(source) == []
