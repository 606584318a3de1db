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


def test_fresh_models_per_pass_are_quiet() -> None:
    # a search trains a new model on each pass: later steps never touch the kept one
    source = """
        import torch
        from torch import nn

        def train(model, loader, lr):
            optimizer = torch.optim.SGD(model.parameters(), lr=lr)
            for x, y in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()

        class Keeper:
            def update(self, score, model):
                if score > self.best:
                    self.best = score
                    self.state = model.state_dict()

        def search(loader, rates, keeper: Keeper):
            best, best_state = 0.0, None
            for lr in rates:
                model = nn.Linear(2, 1)
                train(model, loader, lr)
                score = evaluate(model)
                keeper.update(score, model)
                if score > best:
                    best, best_state = score, None
                    best_state = model.state_dict()
            torch.save(best_state, "best.pt")
            torch.save(keeper.state, "kept.pt")
        """
    assert_marked(source, "TD912")


HELPER = """
import copy
import torch
from torch import nn

class EarlyStopping:
    def __init__(self, patience):
        self.patience, self.best, self.counter = patience, float("inf"), 0

    def save(self):
        torch.save(self.best_state, "best.pt")

    def __call__(self, val_loss, model):
        if val_loss < self.best:
            self.best = val_loss
{snapshot}
            self.counter = 0
        else:
            self.counter += 1

def fit(model: nn.Module, loader, val, epochs):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stopper = EarlyStopping(3)
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        stopper(validate(model, val), model)
{stop}
    print(stopper.best)
{after}
"""


def early_stopping(
    snapshot: str,
    stop: str = "        if stopper.counter > 3:\n            break",
    after: str = "    model.load_state_dict(stopper.best_state)",
) -> str:
    return HELPER.format(snapshot=snapshot, stop=stop, after=after)


def test_an_early_stopping_helper_that_keeps_a_reference_is_flagged() -> None:
    (found,) = lint_findings(
        early_stopping("            self.best_state = model.state_dict()"), "TD912"
    )
    assert found.location.line == 16
    assert found.evidence == {"read_line": 33, "loop_line": 24, "call_line": 29}
    assert (
        "`stopper.best_state` read at line 33 (after the loop at line 24, which takes the "
        "snapshot through `stopper(validate(model, val), model)` at line 29)" in found.message
    )
    assert "copy.deepcopy(model.state_dict())" in found.fix_hint
    assert_marked(
        early_stopping(
            "            self.best_state = {k: v for k, v in model.state_dict().items()}"
            "  # expect: TD912"
        ),
        "TD912",
    )


def test_an_early_stopping_helper_that_copies_or_ends_training_is_quiet() -> None:
    reference = "            self.best_state = model.state_dict()"
    assert_marked(early_stopping(reference + "  # expect: TD912"), "TD912")
    for snapshot in (
        "            self.best_state = copy.deepcopy(model.state_dict())",
        "            self.best_state = {k: v.clone() for k, v in model.state_dict().items()}",
        "            self.best_state = {k: v.cpu() for k, v in model.state_dict().items()}",
        "            self.best_state = model.state_dict()\n            return True",
    ):
        assert_marked(early_stopping(snapshot), "TD912")
    # read only by `save()`: quiet when the helper calls it right after the snapshot
    saved = reference + "\n            self.save()"
    assert_marked(early_stopping(saved, after="    pass"), "TD912")
    assert_marked(early_stopping(reference + "  # expect: TD912", after="    pass"), "TD912")
    # the loop is left right after the helper keeps its snapshot
    assert_marked(early_stopping(reference, "        break"), "TD912")
    # never called from a loop that trains: the caller only evaluates
    called_once = early_stopping(reference).replace(
        "            optimizer.step()\n", "            pass\n"
    )
    assert_marked(called_once.replace(".backward()", ".item()"), "TD912")


def test_a_trainer_method_called_by_the_training_loop_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        class Trainer:
            def fit(self, epochs):
                for epoch in range(epochs):
                    for x, y in self.loader:
                        self.optimizer.zero_grad()
                        nn.functional.mse_loss(self.model(x), y).backward()
                        self.optimizer.step()
                    self.validate()
                self.model.load_state_dict(self.best_weights)

            def validate(self):
                score = evaluate(self.model)
                if score > self.best:
                    self.best = score
                    self.best_weights = self.model.state_dict()  # expect: TD912
                return score

        class Checkpointer:
            def keep(self, model: nn.Module, store):
                store["best"] = model.state_dict()  # expect: TD912

            def save_best(self):
                torch.save(self.kept, "best.pt")

            def fit(self, model: nn.Module, loader, optimizer, epochs):
                store = {}
                for epoch in range(epochs):
                    for x in loader:
                        optimizer.zero_grad()
                        model(x).sum().backward()
                        optimizer.step()
                    if evaluate(model) > 0.9:
                        self.keep(model, store)
                torch.save(store, "best.pt")
        """
    (found, _) = lint_findings(source, "TD912")
    assert "`self.best_weights` read at line 13 (after the loop at line 7, which" in found.message
    assert_marked(source, "TD912")


def test_a_kept_snapshot_read_by_another_method_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        class Trainer:
            def fit(self, epochs):
                for epoch in range(epochs):
                    self.train_epoch()
                    self.remember()

            def train_epoch(self):
                for x, y in self.loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()

            def remember(self):
                if self.improved():
                    self.best_weights = self.model.state_dict()  # expect: TD912

            def save_best(self):
                torch.save(self.best_weights, "best.pt")
        """
    (found,) = lint_findings(source, "TD912")
    assert (
        "read at line 22 (in `save_best()`; the loop at line 7 takes the snapshot through "
        "`self.remember()` at line 9 and trains on)" in found.message
    )
    assert_marked(source, "TD912")
    # written on every call, and the call not guarded: the last snapshot is the final
    # state anyway
    every_pass = source.replace("                if self.improved():\n    ", "")
    assert_marked(every_pass.replace("  # expect: TD912", ""), "TD912")
    # a guarded call takes it only now and then
    guarded = every_pass.replace(
        "                    self.remember()",
        "                    if self.improved():\n                        self.remember()",
    )
    assert_marked(guarded, "TD912")


def test_a_helper_returning_the_live_state_is_followed() -> None:
    td912(
        "            best_state = snapshot(model)  # expect: TD912",
        "    model.load_state_dict(best_state)\n\n"
        "def snapshot(model):\n"
        "    return model.state_dict()",
    )
    td912(
        "            best_state = snapshot(model)",
        "    model.load_state_dict(best_state)\n\n"
        "def snapshot(model):\n"
        "    return copy.deepcopy(model.state_dict())",
    )


BEST_STATE_UNDER_FSDP = """
import torch
from torch.distributed.fsdp import FullStateDictConfig, StateDictType
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

def train(model, loader, optimizer, evaluate):
    best, best_state = 0.0, None
    for epoch in range(10):
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        score = evaluate(model)
        if score > best:
            best = score
            {gather}
    torch.save(cpu_state, "best.pt")
"""


def test_td912_a_state_dict_gathered_under_fsdp_state_dict_type_is_a_copy() -> None:
    """pyKT: under ``FSDP.state_dict_type(model, FULL_STATE_DICT, FullStateDictConfig(
    offload_to_cpu=True))`` state_dict() gathers new CPU tensors; a plain state_dict()
    still holds the live parameters."""
    gathered = (
        "with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, "
        "FullStateDictConfig(offload_to_cpu=True)):\n"
        "                cpu_state = model.state_dict()"
    )
    assert_marked(BEST_STATE_UNDER_FSDP.format(gather=gathered), "TD912")
    found = lint_findings(
        BEST_STATE_UNDER_FSDP.format(gather="cpu_state = model.state_dict()"), "TD912"
    )
    assert [f.location.line for f in found] == [16]


def test_entries_of_a_dict_built_anew_in_the_same_pass_are_quiet() -> None:
    """gsplat's trainer: at a save step it builds ``data = {...}``, adds optional parts
    under their own ``if`` (``data["pose_adjust"] = pose_adjust.state_dict()``) and saves
    it at once. Later passes build another dict, so no stale snapshot is read. A dict
    made once before the loop (the test above) still is."""
    source = """
        import torch
        from torch import nn

        def fit(splats: nn.Module, pose: nn.Module, loader, optimizer, pose_opt, saves):
            for step, batch in enumerate(loader):
                optimizer.zero_grad()
                (splats(batch) + pose(batch)).sum().backward()
                optimizer.step()
                if step in saves:
                    data = {"step": step, "splats": splats.state_dict()}
                    if pose_opt:
                        data["pose_adjust"] = pose.state_dict()
                    torch.save(data, f"ckpt_{step}.pt")
        """
    assert_marked(source, "TD912")
    kept = (
        source.replace(
            '                    data = {"step": step, "splats": splats.state_dict()}\n', ""
        )
        .replace(
            "            for step, batch in enumerate(loader):",
            '            data = {"step": 0}\n            for step, batch in enumerate(loader):',
        )
        .replace(
            'data["pose_adjust"] = pose.state_dict()',
            'data["pose_adjust"] = pose.state_dict()  # expect: TD912',
        )
    )
    assert_marked(kept, "TD912")


def test_a_snapshot_bound_on_every_branch_of_an_if_is_taken_every_pass() -> None:
    # SAM-Med3D: `if multi_gpu: state = model.module.state_dict() else: state =
    # model.state_dict()` chooses how, not whether: each pass saves its own snapshot.
    source = """
        import torch
        from torch import nn

        def fit(model: nn.Module, loader, optimizer, epochs, multi_gpu, rank, best):
            for epoch in range(epochs):
                for x in loader:
                    optimizer.zero_grad()
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
                if not multi_gpu or rank == 0:
                    if multi_gpu:
                        state = model.module.state_dict()
                    elif rank == 0:
                        state = model.state_dict()
                    else:
                        state = model.state_dict()
                    torch.save(state, "last.pt")
                    if loss.item() < best:
                        best = loss.item()
                        torch.save(state, "best.pt")
        """
    assert_marked(source, "TD912")


def test_a_snapshot_bound_on_every_branch_under_a_now_and_then_test_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        def fit(model: nn.Module, loader, optimizer, epochs, multi_gpu, best):
            for epoch in range(epochs):
                for x in loader:
                    optimizer.zero_grad()
                    loss = model(x).sum()
                    loss.backward()
                    optimizer.step()
                if loss.item() < best:
                    best = loss.item()
                    if multi_gpu:
                        best_state = model.module.state_dict()
                    else:
                        best_state = model.state_dict()  # expect: TD912
            model.load_state_dict(best_state)
        """
    assert_marked(source, "TD912")


def test_a_name_bound_anew_before_each_read_reads_its_own_value() -> None:
    """offsite-tuning: under `if is_best`, two sibling `if`s each bind `state_dict` from a
    part's `state_dict()` and save it at once; each save reads its own block's binding,
    on this pass or a later one, never the other block's snapshot. A read with no binding
    of its own before it, after the loop, still sees the stale snapshot."""
    source = """
        import torch
        from torch import nn

        def fit(net: nn.Module, loader, optimizer, which):
            for step, batch in enumerate(loader):
                optimizer.zero_grad()
                net(batch).sum().backward()
                optimizer.step()
                if step % 100 == 0:
                    if which in ("enc", "all"):
                        sd = net.encoder.state_dict(){mark}
                        torch.save(sd, "enc.pt")
                    if which in ("dec", "all"):
                        sd = net.decoder.state_dict(){mark}
                        torch.save(sd, "dec.pt")
            {after}
        """
    assert_marked(source.format(mark="", after="return None"), "TD912")
    stale = source.format(mark="  # expect: TD912", after="torch.save(sd, 'last.pt')")
    assert_marked(stale, "TD912")
