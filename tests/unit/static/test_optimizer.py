"""Lint rules TD607-TD611: optimizer order, GradScaler use, replaced layers, deprecated AMP."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LAB
from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from tests.unit.static.test_loss import applied
from torchdoctor.findings import Applicability, Severity
from torchdoctor.rules.selection import Selection
from torchdoctor.static.fixes import fix_file
from torchdoctor.static.runner import FileJob

# --- TD607 scheduler-before-optimizer --------------------------------------------------------


def test_scheduler_stepped_at_the_top_of_the_epoch_loop_is_flagged() -> None:
    source = """
        import torch

        def train(model, loader, epochs):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
            for epoch in range(epochs):
                scheduler.step()
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
        """
    [found] = lint_findings(source, "TD607")
    assert found.location.line == 8
    assert "(line 12)" in found.message and "skips its first learning-rate value" in found.message


def test_per_step_scheduler_before_the_optimizer_and_through_a_helper_is_flagged() -> None:
    source = """
        from torch import optim

        def train_one_epoch(model, loader, optimizer):
            for x in loader:
                model(x).sum().backward()
                optimizer.step()

        def fit(model, loader, epochs):
            opt = optim.AdamW(model.parameters())
            sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=100)
            for x in loader:
                sched.step()
                model(x).sum().backward()
                opt.step()
            for epoch in range(epochs):
                sched.step()
                train_one_epoch(model, loader, opt)
        """
    assert lint_codes(source, "TD607") == [("TD607", 13), ("TD607", 17)]


def test_a_schedule_stepped_once_per_update_is_information_once_per_epoch_a_warning() -> None:
    """Stepped once per update, the schedule runs one update ahead (a shift of one step in
    many); stepped at the top of each epoch, the whole first epoch trains at the second
    value. The optimizer step may be its own, or a helper's that steps once per call."""
    source = """
        from torch import optim

        def update(model, x, opt):
            model(x).sum().backward()
            opt.step()

        def fit(model, loader, epochs):
            opt = optim.SGD(model.parameters(), lr=0.1)
            sched = optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
            for epoch in range(epochs):
                for x in loader:
                    sched.step()
                    opt.zero_grad()
                    model(x).sum().backward()
                    opt.step()
            for x in loader:
                sched.step()
                opt.zero_grad()
                update(model, x, opt)
            for epoch in range(epochs):
                sched.step()
                for x in loader:
                    opt.zero_grad()
                    update(model, x, opt)
        """
    found = {f.location.line: f for f in lint_findings(source, "TD607")}
    assert sorted(found) == [13, 18, 22]
    assert [found[line].severity for line in (13, 18, 22)] == [
        Severity.INFO,
        Severity.INFO,
        Severity.WARNING,
    ]
    assert "one update ahead" in found[13].message
    assert "skips its first learning-rate value" in found[22].message


def test_scheduler_after_the_optimizer_stays_quiet() -> None:
    source = """
        import torch

        def train(model, loader, epochs):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                scheduler.step()
        """
    assert lint_codes(source, "TD607") == []


def test_guarded_plateau_and_lonely_schedulers_stay_quiet() -> None:
    source = """
        import torch

        def train(model, loader, epochs, val_loss):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            warmup = torch.optim.lr_scheduler.LinearLR(optimizer)
            plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
            for epoch in range(epochs):
                if epoch > 0:
                    warmup.step()
                plateau.step(val_loss)
                for x, y in loader:
                    model(x).sum().backward()
                    optimizer.step()
            for epoch in range(epochs):
                warmup.step()
        """
    assert lint_codes(source, "TD607") == []


@pytest.mark.parametrize(
    ("guard", "flagged"),
    [
        # auto_LiRPA: the rate decays only once the eps schedule has reached its maximum,
        # epochs of updates after the start
        ("eps_scheduler.reached_max_eps()", False),
        ("self.warmup.finished()", False),
        # an option fixed for the run: the first pass already steps the schedule
        ("args.decay", True),
        ("torch.cuda.is_available()", True),
        ('config.get("decay")', True),
    ],
)
def test_td607_a_schedule_stepped_once_the_run_has_moved_on_is_quiet(
    guard: str, flagged: bool
) -> None:
    source = f"""
import torch

def train(model, loader, epochs, eps_scheduler, args, config):
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    for epoch in range(epochs):
        if {guard}:
            scheduler.step(){"  # expect: TD607" if flagged else ""}
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        eps_scheduler.step_epoch()
"""
    assert_marked(source, "TD607")


# --- TD608 clip-before-unscale ---------------------------------------------------------------

AMP_STEP = """
    import torch

    def train(model, loader, optimizer):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda"):
                loss = model(x, y)
            {body}
"""


def amp_step(body: str) -> str:
    return AMP_STEP.format(body=body.strip().replace("\n", "\n            "))


def test_clip_between_scaled_backward_and_scaler_step_is_flagged_with_a_fix() -> None:
    source = amp_step("""
scaler.scale(loss).backward()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
""")
    [found] = lint_findings(source, "TD608")
    assert found.location.line == 11
    assert "line 10" in found.message and "65536" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    fixed = applied(source, found.fix)
    assert "scaler.unscale_(optimizer)\n        torch.nn.utils.clip_grad_norm_" in fixed


def test_clip_value_after_a_scaled_variable_and_unscale_too_late_are_flagged() -> None:
    source = amp_step("""
scaled = scaler.scale(loss)
scaled.backward()
torch.nn.utils.clip_grad_value_(model.parameters(), 0.5)
scaler.unscale_(optimizer)
scaler.step(optimizer)
""")
    assert lint_codes(source, "TD608") == [("TD608", 12)]


def test_scaler_passed_as_a_parameter_is_recognised_by_name() -> None:
    source = """
        from torch.nn.utils import clip_grad_norm_

        def step(model, loss, optimizer, scaler):
            scaler.scale(loss).backward()
            norm = clip_grad_norm_(model.parameters(), 5.0)
            scaler.step(optimizer)
        """
    [found] = lint_findings(source, "TD608")
    assert found.location.line == 6
    assert found.fix is not None
    assert "scaler.unscale_(optimizer)\n    norm = clip_grad_norm_" in applied(source, found.fix)


@pytest.mark.parametrize(
    ("test", "plain_step_branch"),
    [
        ("self.scaler is None", "body"),
        ("not self.scaler", "body"),
        ("self.scaler is not None", "else"),
        ("self.scaler", "else"),
    ],
)
def test_a_plain_step_in_the_branch_without_a_scaler_is_quiet(
    test: str, plain_step_branch: str
) -> None:
    """AudioCraft's solvers: the loss is scaled when there is a scaler, and the plain
    ``optimizer.step()`` sits in the branch taken only without one."""
    plain, scaled = "self.optimizer.step()", "self.scaler.step(self.optimizer)"
    first, second = (plain, scaled) if plain_step_branch == "body" else (scaled, plain)
    source = f"""
        import torch

        class Solver:
            def __init__(self, model, use_amp):
                self.model = model
                self.optimizer = torch.optim.Adam(model.parameters())
                self.scaler = torch.amp.GradScaler() if use_amp else None

            def step(self, loss):
                if self.scaler is not None:
                    loss = self.scaler.scale(loss)
                loss.backward()
                if {test}:
                    {first}
                else:
                    {second}
                self.optimizer.step()  # expect: TD609
        """
    assert_marked(source, "TD609")


def test_unscale_before_clip_stays_quiet() -> None:
    source = amp_step("""
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
scaler.step(optimizer)
scaler.update()
""")
    assert lint_codes(source, "TD608", "TD609") == []


def test_clip_without_scaling_or_with_a_disabled_scaler_stays_quiet() -> None:
    source = """
        import torch

        def plain(model, loss, optimizer):
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

        def disabled(model, loss, optimizer):
            scaler = torch.amp.GradScaler("cuda", enabled=False)
            scaler.scale(loss).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
        """
    assert lint_codes(source, "TD608") == []


def test_clip_on_the_unscaled_branch_stays_quiet() -> None:
    source = """
        import torch

        def step(model, loss, optimizer, scaler, use_amp):
            if use_amp:
                scaler.scale(loss).backward()
                scaler.unscale_(optimizer)
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if use_amp:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
        """
    assert lint_codes(source, "TD608", "TD609") == []


# --- TD609 step-bypasses-grad-scaler ---------------------------------------------------------


def test_direct_optimizer_step_after_scaled_backward_is_flagged_with_a_fix() -> None:
    source = amp_step("""
scaler.scale(loss).backward()
optimizer.step()
""")
    [found] = lint_findings(source, "TD609")
    assert found.location.line == 11
    assert "too large" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert "        scaler.step(optimizer)\n" in applied(source, found.fix)


def test_direct_step_after_unscale_explains_the_lost_inf_check() -> None:
    source = amp_step("""
scaler.scale(loss).backward()
scaler.unscale_(optimizer)
optimizer.step()
scaler.update()
""")
    [found] = lint_findings(source, "TD609")
    assert found.location.line == 12 and "inf/NaN check" in found.message


def test_amp_and_plain_paths_split_by_if_stay_quiet() -> None:
    source = """
        import torch

        def step(model, loss, optimizer, scaler, use_amp):
            if use_amp:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()

        def step2(loss, optimizer, scaler):
            if scaler is not None:
                scaler.scale(loss).backward()
            if scaler is None:
                loss.backward()
                optimizer.step()
        """
    assert lint_codes(source, "TD609") == []


def test_a_second_unscaled_backward_owns_the_next_step() -> None:
    source = """
        import torch

        def gan_step(loss_d, loss_g, opt_d, opt_g, scaler):
            scaler.scale(loss_d).backward()
            scaler.step(opt_d)
            scaler.update()
            loss_g.backward()
            opt_g.step()
        """
    assert lint_codes(source, "TD609") == []


def test_disabled_scaler_stays_quiet() -> None:
    source = """
        import torch

        def step(loss, optimizer):
            scaler = torch.cuda.amp.GradScaler(enabled=False)
            scaler.scale(loss).backward()
            optimizer.step()
        """
    assert lint_codes(source, "TD609") == []


# --- TD610 layer-replaced-after-optimizer ----------------------------------------------------


def test_head_replaced_after_the_optimizer_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        def finetune(model, num_classes, epochs):
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model.fc = nn.Linear(512, num_classes).to("cuda")
            model.classifier[6] = nn.Linear(4096, num_classes)
            setattr(model, "head", nn.Sequential(nn.Dropout(0.1), nn.Linear(8, 2)))
            model.fc.bias = nn.Parameter(torch.zeros(num_classes))
            for epoch in range(epochs):
                if epoch == 5:
                    model.extra = nn.Conv2d(3, 8, 3)
                optimizer.step()
        """
    found = lint_findings(source, "TD610")
    assert [f.location.line for f in found] == [7, 8, 9, 10, 13]
    assert "optimizer at line 6" in found[0].message and "`Linear`" in found[0].message
    assert "`nn.Parameter`" in found[3].message


def test_replacement_in_a_method_through_self_is_flagged() -> None:
    source = """
        from torch import nn, optim

        class Trainer:
            def setup(self):
                self.optimizer = optim.SGD(self.model.parameters(), lr=0.1)
                self.model.head = nn.Linear(16, 3)
        """
    assert lint_codes(source, "TD610") == [("TD610", 7)]


def test_replacement_before_the_optimizer_or_followed_by_a_new_one_stays_quiet() -> None:
    source = """
        import torch
        from torch import nn

        def finetune(model, num_classes):
            model.fc = nn.Linear(512, num_classes)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model.head = nn.Linear(8, 2)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            model.extra = nn.Linear(8, 2)
            optimizer.add_param_group({"params": model.extra.parameters()})
        """
    assert lint_codes(source, "TD610") == []


def test_parameter_free_or_unknown_replacements_stay_quiet() -> None:
    source = """
        import torch
        from torch import nn

        def prune(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.fc = nn.Identity()
            model.dropout = nn.Dropout(0.5)
            model.act = nn.Sequential(nn.ReLU(), nn.Dropout(0.1))
            model.head = make_head()
            model.fc.weight.data = torch.zeros(3, 3)
            model.criterion = nn.CrossEntropyLoss(weight=torch.ones(3))
            model.mse = nn.MSELoss()
            return optimizer
        """
    assert lint_codes(source, "TD610") == []
    # A loss that holds layers is still a new set of parameters.
    source = source.replace("nn.MSELoss()", "nn.AdaptiveLogSoftmaxWithLoss(8, 100, [10])")
    assert lint_codes(source, "TD610") == [("TD610", 13)]


def test_layers_outside_the_optimized_part_or_of_a_rebuilt_model_stay_quiet() -> None:
    source = """
        import torch
        from torch import nn

        def train_head(model):
            optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
            model.backbone.fc = nn.Linear(8, 8)
            other = build()
            other.fc = nn.Linear(8, 8)

        def restart(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model = build()
            model.fc = nn.Linear(8, 8)
        """
    assert lint_codes(source, "TD610") == []


def test_wrapping_the_model_for_data_parallelism_keeps_its_parameters() -> None:
    """DDP/DataParallel share the wrapped module's parameters; wrapping a new layer does not."""
    source = """
        import torch
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel

        class Trainer:
            def __init__(self, model, rank):
                self.model = model
                self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
                self.model = DistributedDataParallel(self.model, device_ids=[rank])
                self.model = nn.DataParallel(module=self.model)

        def attach(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            model.head = nn.DataParallel(nn.Linear(8, 2))
            return optimizer
        """
    assert lint_codes(source, "TD610") == [("TD610", 15)]


def test_layers_replaced_by_a_helper_after_a_helper_built_optimizer_are_flagged() -> None:
    """A method (timm's reset_classifier) or a function that swaps the model's layers,
    called after an optimizer a helper built from model.parameters()."""
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def reset_classifier(self, classes):
                self.head = nn.Linear(32, classes)

            def drop_head(self):
                self.head = nn.Identity()

        def prune(model, keep):
            def shrink(a, b):
                return nn.Linear(8, keep), nn.Linear(keep, 2)
            model.fc1, model.fc2 = shrink(model.fc1, model.fc2)

        def make_optimizer(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            return optimizer

        def main():
            model = Net()
            optimizer = make_optimizer(model)
            model.reset_classifier(3)  # expect: TD610
            prune(model, keep=4)  # expect: TD610
            model.drop_head()
            other = Net()
            other.reset_classifier(5)
            train(model, optimizer)

        def rebuilt():
            model = Net()
            optimizer = make_optimizer(model)
            model.reset_classifier(3)
            optimizer = make_optimizer(model)
        """
    assert_marked(source, "TD610")
    messages = [f.message for f in lint_findings(source, "TD610")]
    assert "`model.head` gets a new `Linear` in `reset_classifier()` at line 24" in messages[0]


@pytest.mark.parametrize(
    "after, flagged",
    [
        # PyCIL's APER: the task's training is done with the local optimizer and its
        # scheduler; the network is rebuilt for the next task, which builds its own.
        ("return", False),
        ("self.evaluate()", False),
        # ... but any later use of it, or of what was made from it, still steps.
        ("optimizer.step()", True),
        ("scheduler.step()", True),
        ("return optimizer", True),
        ("self.optimizer = optimizer", True),
        ("self.fit(loader)", False),
    ],
)
def test_a_replacement_after_the_optimizers_last_use_misses_nothing(
    after: str, flagged: bool
) -> None:
    source = f"""
        import torch
        from torch import nn, optim

        class Learner:
            def _run(self, loader, optimizer, scheduler):
                for x, y in loader:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(self.net(x), y).backward()
                    optimizer.step()
                scheduler.step()

            def _train(self, loader):
                optimizer = optim.SGD(self.net.parameters(), lr=0.1)
                scheduler = optim.lr_scheduler.StepLR(optimizer, 10)
                self._run(loader, optimizer, scheduler)
                self.net = nn.Linear(8, 3)
                {after}
        """
    expected = [("TD610", 17)] if flagged else []
    assert lint_codes(source, "TD610") == expected


@pytest.mark.parametrize(
    "shape",
    [
        # the replacement sits in the loop that steps the optimizer: the next pass steps
        "for epoch in range(3):\n    train(model, optimizer)\n    model.fc = nn.Linear(8, 3)",
        # a trainer handed the optimizer before the swap runs it after
        "trainer = Trainer(model, optimizer)\nmodel.fc = nn.Linear(8, 3)\ntrainer.fit()",
        "engine.attach(optimizer)\nmodel.fc = nn.Linear(8, 3)\nengine.run()",
        # kept in a container, or by a helper of the file that stores it
        "keep.append(optimizer)\nmodel.fc = nn.Linear(8, 3)",
        "remember(optimizer)\nmodel.fc = nn.Linear(8, 3)",
        # a closure made before the swap may step it later
        "step = lambda: optimizer.step()\nmodel.fc = nn.Linear(8, 3)\nrun(step)",
    ],
)
def test_an_optimizer_kept_past_the_replacement_is_still_flagged(shape: str) -> None:
    body = "\n".join("    " + line for line in shape.splitlines())
    source = (
        "import torch\nfrom torch import nn\n\nSTORE = {}\n\n"
        "def remember(opt):\n    STORE['opt'] = opt\n\n"
        "def main(model, engine, keep):\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" + body + "\n"
    )
    assert [code for code, _ in lint_codes(source, "TD610")] == ["TD610"]


def test_a_use_on_the_other_side_of_an_if_does_not_keep_the_optimizer() -> None:
    """The first task trains and then rebuilds the network; the later tasks' branch
    builds, and uses, an optimizer of its own."""
    source = """
        from torch import nn, optim

        def train_task(net, task, run):
            if task == 0:
                optimizer = optim.SGD(net.parameters(), lr=0.1)
                run(net, optimizer)
                net.head = nn.Linear(8, 4)
            else:
                optimizer = optim.SGD(net.parameters(), lr=0.01)
                run(net, optimizer)
            report(net)
        """
    assert lint_codes(source, "TD610") == []
    # a use after the `if`, on both paths, still steps the first optimizer
    assert lint_codes(source.replace("report(net)", "run(net, optimizer)"), "TD610") == [
        ("TD610", 8)
    ]


@pytest.mark.parametrize(
    ("rebound", "flagged"),
    [
        # LLaMA-MoE's gate trainer: the module moved in place, the same object back
        ("self.gate = self.gate.to(device)", False),
        ("self.gate = self.gate.cuda().float()", False),
        # compiled, it runs its own parameters
        ("self.gate = torch.compile(self.gate)", False),
        ("self.gate = torch.compile(self.gate.to(device))", False),
        # a new module, or another one, does replace it
        ("self.gate = nn.Linear(8, 2).to(device)", True),
        ("self.gate = self.spare.to(device)", True),
        ("self.gate = torch.compile(self.spare)", True),
        ("self.gate = torch.compile(nn.Linear(8, 2))", True),
    ],
)
def test_a_module_rebound_to_itself_moved_replaces_nothing(rebound: str, flagged: bool) -> None:
    source = f"""
        import torch
        from torch import nn

        class GateTrainer:
            def train(self, loader, device):
                self.gate = nn.Linear(8, 2)
                self.spare = nn.Linear(8, 2)
                optimizer = torch.optim.AdamW(self.gate.parameters(), lr=1e-3)
                for epoch in range(3):
                    for x, y in loader:
                        optimizer.zero_grad()
                        nn.functional.cross_entropy(self.gate(x), y).backward()
                        optimizer.step()
                    self.save()
                    {rebound}
        """
    expected = [("TD610", 16)] if flagged else []
    assert lint_codes(source, "TD610") == expected


@pytest.mark.parametrize(
    ("compiled", "flagged"),
    [
        ("self.model = torch.compile(self.model)", False),  # makani's _compile_model
        ("self.model = torch.compile(nn.Linear(4, 1))", True),
    ],
)
def test_a_helper_compiling_the_model_after_the_optimizer(compiled: str, flagged: bool) -> None:
    source = f"""
        import torch
        from torch import nn

        class Trainer:
            def __init__(self):
                self.model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self._compile_model()

            def _compile_model(self):
                {compiled}

            def train(self, loader):
                for x, y in loader:
                    self.optimizer.zero_grad()
                    nn.functional.mse_loss(self.model(x), y).backward()
                    self.optimizer.step()
        """
    assert lint_codes(source, "TD610") == ([("TD610", 9)] if flagged else [])


# --- TD611 deprecated-cuda-amp ---------------------------------------------------------------


def test_deprecated_amp_calls_get_exact_safe_fixes() -> None:
    source = """
        import torch as T

        scaler = T.cuda.amp.GradScaler(2.0 ** 10, growth_interval=100)
        with T.cuda.amp.autocast(dtype=T.bfloat16):
            pass
        with T.cuda.amp.autocast():
            pass
        """
    found = lint_findings(source, "TD611")
    assert [f.location.line for f in found] == [4, 5, 7]
    assert all(f.fix is not None and f.fix.applicability is Applicability.SAFE for f in found)
    fixed = source
    for finding in reversed(found):
        fixed = applied(fixed, finding.fix)
    assert 'T.amp.GradScaler("cuda", 2.0 ** 10, growth_interval=100)' in fixed
    assert 'T.amp.autocast("cuda", dtype=T.bfloat16)' in fixed
    assert 'T.amp.autocast("cuda")' in fixed


def test_custom_fwd_and_bwd_decorators_get_a_device_type() -> None:
    source = """
        import torch

        class Op(torch.autograd.Function):
            @staticmethod
            @torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)
            def forward(ctx, x):
                return x

            @staticmethod
            @torch.cuda.amp.custom_bwd
            def backward(ctx, grad):
                return grad
        """
    found = lint_findings(source, "TD611")
    assert [f.location.line for f in found] == [6, 11]
    assert '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")' in applied(
        source, found[0].fix
    )
    assert '@torch.amp.custom_bwd(device_type="cuda")' in applied(source, found[1].fix)


def test_imported_names_and_positional_autocast_are_flagged_without_a_fix() -> None:
    source = """
        import torch
        import torch.cuda.amp as cuda_amp
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast():
            pass
        with cuda_amp.autocast():
            pass
        with torch.cuda.amp.autocast(False):
            pass
        """
    found = lint_findings(source, "TD611")
    assert [f.location.line for f in found] == [6, 7, 9, 11]
    assert all(f.fix is None for f in found)
    assert "deprecated `torch.cuda.amp.GradScaler`" in found[0].message


def test_the_current_amp_api_stays_quiet() -> None:
    source = """
        import torch
        from torch.amp import GradScaler, autocast

        scaler = torch.amp.GradScaler("cuda")
        other = torch.GradScaler()
        mine = GradScaler("cuda")
        with torch.amp.autocast("cuda"), torch.autocast("cuda", dtype=torch.float16):
            pass
        with autocast("cpu", dtype=torch.bfloat16):
            pass
        """
    assert lint_codes(source, "TD611") == []


def test_other_amp_modules_and_local_names_stay_quiet() -> None:
    source = """
        from apex import amp
        from torch.cuda import amp as cuda_amp_module

        def autocast():
            return None

        model, optimizer = amp.initialize(model, optimizer)
        with autocast():
            pass
        """
    assert lint_codes(source, "TD611") == []


def test_references_that_construct_nothing_stay_quiet() -> None:
    source = """
        import torch

        def supported(func, scaler):
            return func in (torch.cuda.amp.autocast, torch.amp.autocast) or isinstance(
                scaler, torch.cuda.amp.GradScaler)
        """
    assert lint_codes(source, "TD611") == []


def test_safe_fixes_turn_the_lab_script_into_its_fixed_twin(tmp_path: Path) -> None:
    folder = LAB / "TD611-deprecated-cuda-amp"
    script = tmp_path / "train.py"
    script.write_text((folder / "buggy.py").read_text(encoding="utf-8"), encoding="utf-8")
    result = fix_file(FileJob(str(script)), Selection.from_options(["TD611"], []))
    assert result is not None and result.applied == 2

    def amp_lines(text: str) -> list[str]:
        return [line.split("  # expect")[0] for line in text.splitlines() if ".amp." in line]

    assert amp_lines(result.fixed) == amp_lines((folder / "fixed.py").read_text("utf-8"))
    assert lint_codes(result.fixed, "TD611") == []


PER_EPOCH_METHOD = """
import torch
class Trainer:
    def __init__(self, model, loader):
        self.model, self.loader = model, loader
        self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
        self.sched = {scheduler}
    def fit(self):
        for epoch in range(10):
            {call}
    def run_epoch(self, metric=None):
        {before}
        for x in self.loader:
            self.opt.zero_grad()
            self.model(x).sum().backward()
            self.opt.step()
"""
STEP_LR = "torch.optim.lr_scheduler.StepLR(self.opt, 3)"


@pytest.mark.parametrize(
    "scheduler, call, before, flagged",
    [
        (STEP_LR, "self.run_epoch()", "self.sched.step()", True),
        (STEP_LR, "self.run_epoch()", "if self.epoch > 0:\n            self.sched.step()", False),
        (STEP_LR, "pass", "self.sched.step()", False),  # run_epoch is never called in a loop
        (STEP_LR, "self.run_epoch()", "pass", False),
        (
            "torch.optim.lr_scheduler.ReduceLROnPlateau(self.opt)",
            "self.run_epoch(1.0)",
            "self.sched.step(metric)",
            False,
        ),
    ],
)
def test_td607_a_method_run_once_per_pass_that_steps_the_schedule_first(
    scheduler: str, call: str, before: str, flagged: bool
) -> None:
    source = PER_EPOCH_METHOD.format(scheduler=scheduler, call=call, before=before)
    found = lint_findings(source, "TD607")
    assert [f.location.line for f in found] == ([12] if flagged else [])
    if flagged:
        assert "in `run_epoch`, which the loop at line 9 calls on every pass" in found[0].message


AMP_HELPER = """
import torch
class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler("cuda")
    def _unscale(self):
        self.scaler.unscale_(self.optimizer)
    def _clip(self):
        {clip_body}
    def step(self, loss):
        self.scaler.scale(loss).backward()
        {before}
        self._clip()
        self.scaler.step(self.optimizer)
        self.scaler.update()
"""
CLIP = "torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)"


@pytest.mark.parametrize(
    "clip_body, before, flagged",
    [
        (CLIP, "pass", True),  # the clip moved into a helper, nothing unscales
        (f"self._unscale()\n        {CLIP}", "pass", False),  # the helper unscales first
        (CLIP, "self._unscale()", False),  # another helper unscales before it
        (CLIP, "self.scaler.unscale_(self.optimizer)", False),
        ("pass", "pass", False),  # a helper that clips nothing
    ],
)
def test_td608_follows_the_clip_into_helpers(clip_body: str, before: str, flagged: bool) -> None:
    found = lint_findings(AMP_HELPER.format(clip_body=clip_body, before=before), "TD608")
    assert len(found) == int(flagged)
    if flagged:
        assert "(in `_clip()`, called at line 15)" in found[0].message


_EVALUATES_OR_LOADS = """
import torch
from torch import nn


class Trainer:
    def __init__(self):
        self.model = None

    def train_model(self, batches):
        self.model = nn.Linear(4, 2)
        optimizer = torch.optim.Adam(self.model.parameters())
        for x in batches:
            optimizer.zero_grad()
            self.model(x).sum().backward()
            optimizer.step()
            self.eval_model(batches)

    def eval_model(self, batches):
        {guard}
            self.model = nn.Linear(4, 2)
            self.model.load_state_dict(torch.load("model.pt", map_location="cpu"))
        return [self.model(x) for x in batches]
"""


@pytest.mark.parametrize(
    ("guard", "flagged"),
    [
        # pycorrector: eval_model() builds the model only when none was trained
        ("if self.model is None:", False),
        ("if not self.model:", False),
        ("if self.model is not None:\n            pass\n        else:", False),
        # a guard on something else, or none: the trained model is replaced
        ("if self.model is not None:", True),
        ("if batches:", True),
    ],
)
def test_td610_a_helper_building_the_model_only_when_it_is_missing(
    guard: str, flagged: bool
) -> None:
    assert bool(lint_codes(_EVALUATES_OR_LOADS.format(guard=guard), "TD610")) is flagged
