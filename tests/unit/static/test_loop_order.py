"""TD201, TD203, TD204, TD205: the order of backward, zero_grad and step in loops."""

from __future__ import annotations

import textwrap

import pytest

from tests.unit.static.helpers import assert_marked, lint_findings
from torchdoctor.findings import Applicability
from torchdoctor.rules.selection import Selection
from torchdoctor.static.fixes import apply_fixes
from torchdoctor.static.runner import lint_sources

# --- TD201 grads-never-cleared ----------------------------------------------------------


def test_td201_flags_the_step_of_a_loop_that_never_clears() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()  # expect: TD201
    """
    assert_marked(src, "TD201")


def test_td201_message_names_the_step_and_the_loop() -> None:
    src = """
    import torch
    def train(model, loader):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            model(x).sum().backward()
            opt.step()
    """
    (found,) = lint_findings(src, "TD201")
    assert "`opt.step()` at line 7" in found.message
    assert "loop that starts at line 5" in found.message
    assert found.fix is not None and found.fix.applicability.value == "unsafe"


def test_td201_flags_zero_grad_only_outside_the_loop() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        optimizer.zero_grad()
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()  # expect: TD201
    """
    assert_marked(src, "TD201")


def test_td201_a_step_on_one_pass_only_leaves_nothing_for_a_second() -> None:
    # swa_gaussian: one backward and step under `if i == 0:` to fill KFAC's statistics
    src = """
    import torch
    def sample(model, optimizer, x, y, n, loader):
        for i in range(n):
            if i == 0:
                model(x).sum().backward()
                optimizer.step()
        for index, (x, y) in enumerate(loader):
            if 0 == index:
                model(x).sum().backward()
                optimizer.step()
        for i in range(n):
            if i == 0:
                pass
            else:
                model(x).sum().backward()
                optimizer.step()  # expect: TD201
        for i in range(n):
            i = i // 2
            if i == 0:
                model(x).sum().backward()
                optimizer.step()  # expect: TD201
        for x, y in loader:
            if x == 0:
                model(x).sum().backward()
                optimizer.step()  # expect: TD201
    """
    assert_marked(src, "TD201")


def test_td201_flags_a_method_loop_with_self_attribute_optimizer() -> None:
    src = """
    import torch
    class Trainer:
        def __init__(self, model):
            self.model = model
            self.opt = torch.optim.Adam(model.parameters())

        def fit(self, loader):
            for x, y in loader:
                self.model(x).sum().backward()
                self.opt.step()  # expect: TD201
    """
    assert_marked(src, "TD201")


_TIMED_STEPS = """
    import time
    import torch

    def bench(layer, optimizer, hidden, target, steps, loader):
        start = time.time()
        {loop}
            out = layer({inputs})
            loss = ((out - target) ** 2).mean()
            loss.backward()
            optimizer.step()
        print("step time", (time.time() - start) / steps)
        print("peak", torch.cuda.max_memory_allocated())
    """


@pytest.mark.parametrize("loop", ["for _ in range(steps):", "for i in range(1000):"])
def test_td201_is_information_in_a_loop_repeating_one_step_to_time_it(loop: str) -> None:
    """Pyraformer's and torchgpipe's benchmarks: the same step on the same tensors, with a
    clock or memory counter read after the loop; the weights it trains are never used."""
    [found] = lint_findings(_TIMED_STEPS.format(loop=loop, inputs="hidden"), "TD201")
    assert found.severity.value == "info"
    assert "measures time or memory" in found.message


@pytest.mark.parametrize(
    ("loop", "inputs"),
    [
        ("for i in range(steps):", "hidden[i]"),  # the counter picks the data
        ("for x in loader:", "x"),  # a training loop, timed
        ("for _ in range(steps):", "next(iter(loader))"),  # draws its batch
    ],
)
def test_td201_stays_an_error_in_a_timed_loop_over_data(loop: str, inputs: str) -> None:
    [found] = lint_findings(_TIMED_STEPS.format(loop=loop, inputs=inputs), "TD201")
    assert found.severity.value == "error"


def test_td201_stays_an_error_in_a_repeated_step_nothing_measures() -> None:
    source = _TIMED_STEPS.format(loop="for _ in range(steps):", inputs="hidden")
    source = source.replace('print("step time", (time.time() - start) / steps)', "pass")
    source = source.replace('print("peak", torch.cuda.max_memory_allocated())', "pass")
    [found] = lint_findings(source, "TD201")
    assert found.severity.value == "error"


def test_capitalised_loss_names_are_losses_not_autograd_functions() -> None:
    """SAC's ``V_loss.backward()``: a capitalised name bound to a computed value is a
    loss; each optimizer's own zero_grad/backward/step comes before the next one's, so
    no step runs before its backward (TD204), and a loop without zero_grad is seen
    (TD201). ``MyFunction.backward(ctx, grad)`` on a class stays no backward."""
    source = """
        import torch
        from torch import nn
        class Scale(torch.autograd.Function):
            pass
        def update(value_net, policy_net, batches, crit):
            value_opt = torch.optim.Adam(value_net.parameters())
            policy_opt = torch.optim.Adam(policy_net.parameters())
            for s, target in batches:
                V_loss = crit(value_net(s), target).mean()
                value_opt.zero_grad()
                V_loss.backward(retain_graph=True)
                value_opt.step()
                pi_loss = policy_net(s).mean()
                policy_opt.zero_grad()
                pi_loss.backward()
                policy_opt.step()
                Scale.backward(None, s)
        """
    assert_marked(source, "TD204")
    no_clearing = """
        import torch
        def fit(value_net, batches, crit):
            opt = torch.optim.Adam(value_net.parameters())
            for s, target in batches:
                Q_loss = crit(value_net(s), target)
                Q_loss.backward()
                opt.step()  # expect: TD201
        """
    assert_marked(no_clearing, "TD201")


def test_a_capitalised_alias_of_a_loss_is_a_loss() -> None:
    """BEGAN (a GAN collection): ``G_loss = D_fake_loss`` then ``G_loss.backward()``. The
    alias names a computed loss, not a class, so the generator's own backward sits
    between its zero_grad and its step (no TD203); an alias of a class stays a class."""
    source = """
        import torch
        class Op(torch.autograd.Function):
            pass
        def train(G, D, G_opt, D_opt, loader, k):
            Fn = Op
            for x in loader:
                D_opt.zero_grad()
                D_real_loss = torch.mean(torch.abs(D(x) - x))
                fake = G(torch.rand(4, 8))
                D_fake_loss = torch.mean(torch.abs(D(fake) - fake))
                D_loss = D_real_loss - k * D_fake_loss
                D_loss.backward()
                D_opt.step()
                G_opt.zero_grad()
                fake = G(torch.rand(4, 8))
                D_fake_loss = torch.mean(torch.abs(D(fake) - fake))
                G_loss = D_fake_loss
                G_loss.backward()
                G_opt.step()
                Fn.backward(None, x)
        """
    assert_marked(source, "TD203", "TD201", "TD204")


def test_td201_quiet_with_zero_grad_in_loop() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    """
    assert_marked(src, "TD201")


def test_td201_quiet_with_gradient_accumulation() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, k=4):
        for i, (x, y) in enumerate(loader):
            loss = model(x).sum() / k
            loss.backward()
            if (i + 1) % k == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert_marked(src, "TD2")


def test_td201_quiet_with_grad_set_to_none_by_hand() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
            for p in model.parameters():
                p.grad = None
    """
    assert_marked(src, "TD201")


def test_td201_quiet_when_a_helper_of_the_file_clears() -> None:
    src = """
    import torch
    def reset(model):
        model.zero_grad(set_to_none=True)

    def train(model, loader, optimizer):
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
            reset(model)
    """
    assert_marked(src, "TD201")


def test_td201_quiet_when_a_method_defined_further_down_clears() -> None:
    """The loop is checked against the whole class, not the part read so far: a trainer
    whose loop calls a batch method defined below it, which clears first."""
    src = """
    import torch

    class Trainer:
        def train_epoch(self, loader):
            for idx, sample in enumerate(loader):
                loss = self.train_one_batch(idx, sample)
                loss.backward()
                self.optimizer.step()

        def train_one_batch(self, idx, sample):
            self.optimizer.zero_grad(set_to_none=True)
            return self.model(sample).sum()

    def train(model, loader, optimizer):
        for x in loader:
            loss = batch_loss(model, x)
            loss.backward()
            optimizer.step()  # expect: TD201

    def batch_loss(model, x):
        return model(x).sum()
    """
    assert_marked(src, "TD201")


def test_td201_quiet_for_lbfgs_closure() -> None:
    src = """
    import torch
    def train(model, loader):
        optimizer = torch.optim.LBFGS(model.parameters())
        for x, y in loader:
            def closure():
                optimizer.zero_grad()
                loss = model(x).sum()
                loss.backward()
                return loss
            optimizer.step(closure)
    """
    assert_marked(src, "TD2")


def test_td201_quiet_for_reinforcement_learning_env_step() -> None:
    src = """
    import torch
    def rollout(env, policy, loss_fn):
        obs = env.reset()
        for t in range(100):
            action = policy(obs)
            obs, reward, done, info = env.step(action)
            loss_fn(reward).backward()
    """
    assert_marked(src, "TD2")


# --- TD203 zero-grad-between-backward-and-step ------------------------------------------


def test_td203_flags_zero_grad_between_backward_and_step() -> None:
    src = """
    import torch
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.zero_grad()  # expect: TD203
        optimizer.step()
    """
    assert_marked(src, "TD2")


def test_td203_flags_inside_the_accumulation_branch() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, k):
        for i, (x, y) in enumerate(loader):
            model(x).sum().backward()
            if (i + 1) % k == 0:
                optimizer.zero_grad()  # expect: TD203
                optimizer.step()
    """
    assert_marked(src, "TD203")


def test_td203_flags_model_zero_grad_with_a_single_optimizer() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            model(x).sum().backward()
            model.zero_grad()  # expect: TD203
            optimizer.step()
    """
    assert_marked(src, "TD203")


def test_td203_fix_moves_the_call_to_the_top_of_the_loop() -> None:
    src = textwrap.dedent("""\
        import torch
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.zero_grad()
            optimizer.step()
        """)
    (found,) = lint_findings(src, "TD203")
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    fixed, applied = apply_fixes(src, [found.fix])
    assert applied == 1
    assert fixed == textwrap.dedent("""\
        import torch
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        """)
    assert lint_findings(fixed, "TD2") == []


def test_td203_quiet_when_zero_grad_skips_the_step() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            if not torch.isfinite(loss):
                optimizer.zero_grad()
                continue
            optimizer.step()
    """
    assert_marked(src, "TD203")


def test_td203_quiet_for_two_optimizers_of_a_gan() -> None:
    src = """
    import torch
    def train(netD, netG, loader, optimizerD, optimizerG):
        for real in loader:
            netD.zero_grad()
            errD = netD(real).mean() - netD(netG(noise())).mean()
            errD.backward()
            optimizerD.step()
            netG.zero_grad()
            errG = -netD(netG(noise())).mean()
            errG.backward()
            optimizerG.step()
    """
    assert_marked(src, "TD203", "TD204", "TD201")


def test_td203_quiet_when_zero_grad_follows_the_step() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    """
    assert_marked(src, "TD203")


def test_td203_quiet_when_another_backward_refills_before_the_step() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            model(x).sum().backward()
            optimizer.zero_grad()
            model(y).sum().backward()
            optimizer.step()
    """
    assert_marked(src, "TD203")


# --- TD204 step-before-backward ---------------------------------------------------------


def test_td204_flags_a_step_before_backward() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            optimizer.step()  # expect: TD204
            loss = model(x).sum()
            loss.backward()
    """
    assert_marked(src, "TD2")


def test_td204_flags_scaler_step_before_backward() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            scaler.step(optimizer)  # expect: TD204
            scaler.update()
            scaler.scale(model(x).sum()).backward()
    """
    assert_marked(src, "TD204")


def test_td204_quiet_for_guarded_step_at_the_top() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, k):
        for i, (x, y) in enumerate(loader):
            if i > 0 and i % k == 0:
                optimizer.step()
                optimizer.zero_grad()
            model(x).sum().backward()
    """
    assert_marked(src, "TD204")


def test_td204_quiet_for_the_usual_order() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, scheduler):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
            scheduler.step()
    """
    assert_marked(src, "TD2")


def test_td204_quiet_when_backward_happens_in_a_helper() -> None:
    src = """
    import torch
    def train(model, loader, optimizer):
        for x, y in loader:
            optimizer.step()
            optimizer.zero_grad()
            compute_and_backward(model, x, y)
    """
    assert_marked(src, "TD204")


def test_td204_quiet_when_a_gradient_call_fills_the_cleared_optimizer() -> None:
    # Round 40's DARTS search: the architect computes the architecture gradients in
    # another file between alpha_optim's clearing and its step.
    src = """
    import torch
    def train(model, architect, loader, w_optim, alpha_optim):
        for (x, y), (vx, vy) in loader:
            alpha_optim.zero_grad()
            architect.unrolled_backward(x, y, vx, vy, w_optim)
            alpha_optim.step()
            w_optim.zero_grad()
            model.loss(x, y).backward()
            w_optim.step()
    """
    assert_marked(src, "TD204")
    # Another optimizer's clearing, or a data move, fills no gradient.
    for between in (
        "w_optim.zero_grad()",
        "x = x.to('cuda')",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)",
    ):
        flagged = src.replace(
            "architect.unrolled_backward(x, y, vx, vy, w_optim)", between
        ).replace("alpha_optim.step()", "alpha_optim.step()  # expect: TD204")
        assert_marked(flagged, "TD204")


# --- TD205 graph-retained-across-steps --------------------------------------------------


def test_td205_flags_a_running_sum_of_the_loss() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        total = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss  # expect: TD205
        return total
    """
    assert_marked(src, "TD205")


def test_td205_flags_appending_the_loss_to_a_history() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        history = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss)  # expect: TD205
    """
    assert_marked(src, "TD205")


def test_td205_flags_total_equals_total_plus_scaled_loss() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running = running + loss * x.size(0)  # expect: TD205
    """
    assert_marked(src, "TD205")


def test_td205_quiet_with_item_detach_or_float() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        total, history, seen = 0.0, [], []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
            history.append(loss.detach())
            seen.append(float(loss))
    """
    assert_marked(src, "TD205")


def test_td205_quiet_for_a_micro_batch_sum_that_is_backpropagated() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        for batch in loader:
            optimizer.zero_grad()
            loss = 0
            for x, y in batch:
                loss = loss + criterion(model(x), y)
            loss.backward()
            optimizer.step()
    """
    assert_marked(src, "TD205")


def test_td205_quiet_in_evaluation_under_no_grad() -> None:
    src = """
    import torch
    def train(model, loader, optimizer, criterion):
        total = 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                total += criterion(model(x), y)
    """
    assert_marked(src, "TD205")


def test_td203_quiet_for_gradient_surgery_that_sets_grads_by_hand() -> None:
    assert_marked(
        """
    import torch
    def train(model, loader, optimizer, project):
        for x, y in loader:
            model(x).sum().backward()
            grads = [p.grad.clone() for p in model.parameters()]
            optimizer.zero_grad()
            for p, g in zip(model.parameters(), project(grads)):
                p.grad = g
            optimizer.step()
    """,
        "TD203",
    )


# --- TD201 through helpers: the loop body split into functions and methods ---------------


def test_td201_sees_a_step_helper_called_from_the_loop() -> None:
    assert_marked(
        """
    import torch
    def train_step(model, optimizer, x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    def main(model, loader):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            train_step(model, optimizer, x, y)  # expect: TD201
    """,
        "TD201",
    )


def test_td201_sees_a_loop_body_split_into_methods() -> None:
    assert_marked(
        """
    import torch
    class Trainer:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer
        def _backward(self, loss):
            loss.backward()
        def _update(self):
            self.optimizer.step()
        def fit(self, loader):
            for x, y in loader:
                self._backward(self.model(x).sum())
                self._update()  # expect: TD201
    """,
        "TD201",
    )


def test_td201_quiet_when_a_helper_clears_the_gradients() -> None:
    assert_marked(
        """
    import torch
    class Trainer:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer
        def _reset(self):
            self.optimizer.zero_grad(set_to_none=True)
        def _update(self, loss):
            loss.backward()
            self.optimizer.step()
        def fit(self, loader):
            for x, y in loader:
                self._reset()
                self._update(self.model(x).sum())
    def step(model, optimizer, x):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
    def main(model, optimizer, loader):
        for x in loader:
            step(model, optimizer, x)
    """,
        "TD201",
    )


def test_td201_quiet_on_closure_helpers_and_accumulating_helpers() -> None:
    assert_marked(
        """
    import torch
    def lbfgs_round(optimizer, closure):
        optimizer.step(closure)
    def accumulate(model, optimizer, x, i, k):
        (model(x).sum() / k).backward()
        if (i + 1) % k == 0:
            optimizer.step()
            optimizer.zero_grad()
    def main(model, loader, closure):
        optimizer = torch.optim.LBFGS(model.parameters())
        adam = torch.optim.Adam(model.parameters())
        for i, x in enumerate(loader):
            lbfgs_round(optimizer, closure)
            accumulate(model, adam, x, i, 4)
    """,
        "TD201",
    )


def test_loop_order_rules_quiet_in_framework_owned_steps() -> None:
    # Lightning's training_step (manual optimization, accumulating), an ignite handler
    # and a Trainer subclass's training_step: the framework runs the loop.
    assert_marked(
        """
    import torch
    import lightning as L
    from transformers import Trainer
    class Lit(L.LightningModule):
        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            self.manual_backward(self.net(batch).mean() / 4)
            if (batch_idx + 1) % 4 == 0:
                opt.step()
                opt.zero_grad()
    class HF(Trainer):
        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = self.compute_loss(model, inputs)
            loss.backward()
            return loss.detach()
    def attach(engine, scheduler, optimizer):
        @engine.on("iteration_completed")
        def step(engine):
            optimizer.step()
            scheduler.step()
    """,
        "TD201",
        "TD203",
        "TD204",
        "TD502",
        "TD607",
    )


FRAMEWORK_LOOP = """
import torch
{imports}
class Model({base}):
    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        for chunk in batch.split(2):
            self.manual_backward(self.net(chunk).sum())
            opt.step()  {mark}
"""


def test_loop_order_rules_stay_out_of_framework_subclasses() -> None:
    assert_marked(
        FRAMEWORK_LOOP.format(imports="import lightning as L", base="L.LightningModule", mark=""),
        "TD201",
    )
    assert_marked(
        FRAMEWORK_LOOP.format(
            imports="from pytorch_lightning import LightningModule", base="LightningModule", mark=""
        ),
        "TD201",
    )
    # The same method in a plain class is the user's own loop.
    assert_marked(
        FRAMEWORK_LOOP.format(imports="", base="object", mark="# expect: TD201").replace(
            "self.manual_backward(self.net(chunk).sum())", "self.net(chunk).sum().backward()"
        ),
        "TD201",
    )


def test_loop_order_rules_stay_out_of_decorated_event_handlers() -> None:
    assert_marked(
        """
    import torch
    def attach(trainer, model, optimizer, scheduler, loader):
        @trainer.on("epoch_completed")
        def finetune(engine):
            for x in loader:
                scheduler.step()
                model(x).sum().backward()
                optimizer.step()
    """,
        "TD201",
        "TD607",
        "TD204",
    )


def test_td205_quiet_for_a_few_fixed_passes_and_flagged_for_many() -> None:
    # Two backward passes whose losses are averaged afterwards (MC dropout): bounded.
    assert_marked(
        """
    import torch
    def closure(model, x):
        passes = 2
        losses = []
        for index in range(passes):
            loss = model(x).sum()
            losses.append(loss)
            loss.backward(retain_graph=index < passes - 1)
        return torch.stack(losses).mean()
    def train(model, x, optimizer):
        history = []
        for step in range(1000):
            loss = model(x).sum()
            history.append(loss)  # expect: TD205
            loss.backward()
            optimizer.step()
    """,
        "TD205",
    )


def test_td205_quiet_when_a_meter_of_the_project_reads_the_loss_detached() -> None:
    """A project's averager whose add()/append()/update-style method reads its argument
    only through `.data`, `.item()` or `.detach()` keeps a number, not a graph: in the
    same file or another file of the project."""
    meter = """
    class Averager(object):
        def __init__(self):
            self.n, self.sum = 0, 0
        def add(self, v):
            count = v.data.numel()
            v = v.data.sum()
            self.n += count
            self.sum += v

    class History:
        def __init__(self):
            self.values = []
        def append(self, value):
            self.values.append(value.detach().cpu())
        def add(self, weight, value):
            self.values.append(weight * value.item())
    """
    train = """
    import torch
    from meters import Averager, History
    def train(model, loader, optimizer, criterion):
        avg, hist = Averager(), History()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            avg.add(loss)
            hist.append(loss)
            hist.add(2.0, loss)
    """
    found = lint_sources(
        [("meters.py", textwrap.dedent(meter)), ("train.py", textwrap.dedent(train))],
        Selection.from_options(("TD205",)),
    )
    assert [f.code for f in found] == []
    single_file = textwrap.dedent(meter) + textwrap.dedent(train).replace(
        "from meters import Averager, History\n", ""
    )
    assert_marked(single_file, "TD205")


def test_td205_still_flags_a_meter_that_keeps_the_tensor() -> None:
    """A project class whose add() keeps its argument as it is (or only partly detached)
    holds every step's graph."""
    src = """
    import torch
    class Meter:
        def __init__(self):
            self.sum = 0
        def add(self, v):
            self.sum += v
    class Mixed:
        def __init__(self):
            self.sum = 0
        def add(self, v):
            print(v.item())
            self.sum += v
    class Rebound:
        def __init__(self):
            self.sum = 0
        def add(self, v):
            v = v * 2
            self.sum += v
    def train(model, loader, optimizer, criterion):
        meter, mixed, rebound = Meter(), Mixed(), Rebound()
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            meter.add(loss)  # expect: TD205
            mixed.add(loss)  # expect: TD205
            rebound.add(loss)  # expect: TD205
    """
    assert_marked(src, "TD205")


CLOSURE_STEP = """
import torch
net = torch.nn.Linear(2, 1)
optimizer = torch.optim.{optimizer}(net.parameters(), lr=0.5)
def closure():
    {clear}
    loss = (net(x) - y).pow(2).mean()
    loss.backward()
    return loss
for epoch in range(10):
    {outside}
    optimizer.step(closure){mark}
"""


@pytest.mark.parametrize(
    "optimizer, clear, outside, flagged",
    [
        ("LBFGS", "pass", "pass", True),
        ("LBFGS", "pass", "optimizer.zero_grad()", True),  # cleared once, evaluated often
        ("LBFGS", "optimizer.zero_grad()", "pass", False),
        ("LBFGS", "net.zero_grad()", "pass", False),
        ("SGD", "pass", "pass", True),
        ("SGD", "pass", "optimizer.zero_grad()", False),  # one evaluation per step
    ],
)
def test_td201_a_closure_that_never_clears_gradients(
    optimizer: str, clear: str, outside: str, flagged: bool
) -> None:
    mark = "  # expect: TD201" if flagged else ""
    source = CLOSURE_STEP.format(optimizer=optimizer, clear=clear, outside=outside, mark=mark)
    assert_marked(source, "TD201")


def test_td205_flags_a_component_of_the_backpropagated_loss_kept_in_a_total() -> None:
    """Truncated BPTT: `loss` is added into `chunk`, which is backpropagated, and into a
    report total that lives for the whole epoch."""
    source = """
        def train(model, optimizer, steps, criterion):
            total = 0
            chunk = 0
            for step in range(steps):
                loss = criterion(model(step))
                chunk += loss
                total += loss / steps  # expect: TD205
                if step % 5 == 4:
                    optimizer.zero_grad()
                    chunk.backward()
                    optimizer.step()
                    chunk = 0
            return total
        """
    assert_marked(source, "TD205")


def test_td205_quiet_for_a_sum_over_losses_already_computed() -> None:
    """The loop runs over a list of losses made before it: summing them keeps no graph
    the list does not hold already, and the sum is what the helper is for."""
    source = """
        def compute_aux_loss(aux_list, backward=False):
            aux_loss_sum = 0
            for aux_loss in aux_list:
                aux_loss_sum += aux_loss
                if backward:
                    aux_loss.backward()
            return aux_loss_sum
        """
    assert_marked(source, "TD205")


_PER_STEP_DISCRIMINATORS = """
    def train(nets_d, optimizers_d, data_loader, steps, loss_fn):
        data_iter = iter(data_loader)
        {outer_reset}
        for step in range(steps):
            images = {draw}
            {inner_reset}
            for i in range(len(nets_d)):
                nets_d[i].zero_grad()
                err_d = loss_fn(nets_d[i], images[i])
                err_d.backward()
                optimizers_d[i].step()
                err_d_total += err_d  {mark}
            print(step, float(err_d_total))
    """


@pytest.mark.parametrize("draw", ["next(data_iter)", "data_iter.next()"])
def test_td205_quiet_for_a_sum_over_one_steps_discriminators(draw: str) -> None:
    """Reset at every batch the outer loop draws: one step's graphs at most, however many
    discriminators the inner loop runs over."""
    source = _PER_STEP_DISCRIMINATORS.format(
        outer_reset="", draw=draw, inner_reset="err_d_total = 0", mark=""
    )
    assert_marked(source, "TD205")


def test_td205_flags_the_same_sum_when_it_is_never_reset() -> None:
    source = _PER_STEP_DISCRIMINATORS.format(
        outer_reset="err_d_total = 0",
        draw="next(data_iter)",
        inner_reset="pass",
        mark="# expect: TD205",
    )
    assert_marked(source, "TD205")


def test_td205_flags_an_epoch_total_reset_per_epoch_over_the_batches() -> None:
    """An epoch loop that resets the total but draws no batch itself: the inner loop is
    the step loop, and every batch's graph stays until the epoch ends."""
    source = """
        def train(model, loader, optimizer, epochs):
            for epoch in range(epochs):
                total = 0
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    total += loss  # expect: TD205
                print(epoch, float(total))
        """
    assert_marked(source, "TD205")


_PER_BATCH_REPEATS = """
    def train(model_d, heads, optimizers, loader, repeats, loss_fn, epochs):
        for epoch in range(epochs):
            for {outer_target} in {outer_iter}:
                total = 0.0
                losses = []
                for {inner_target} in {inner_iter}:
                    optimizer.zero_grad()
                    loss = loss_fn({call})
                    loss.backward()
                    optimizer.step()
                    total += loss  {mark}
                    losses.append(loss)  {mark}
                print(float(total), [float(l) for l in losses])
    """


@pytest.mark.parametrize(
    ("outer_target", "outer_iter", "inner_target", "inner_iter", "call"),
    [
        # MelGAN: the discriminator trained `repeats` times on the batch of the loader loop
        ("(mel, audio)", "loader", "_", "range(repeats)", "model_d(audio)"),
        # iBOT's linear heads: one loss per head, on the features of the loader's batch
        (
            "it, (inp, target)",
            "enumerate(loader)",
            "head, optimizer",
            "zip(heads, optimizers)",
            "head(inp), target",
        ),
    ],
)
def test_td205_quiet_for_a_total_reset_per_batch_over_one_batchs_repeats_or_heads(
    outer_target: str, outer_iter: str, inner_target: str, inner_iter: str, call: str
) -> None:
    source = _PER_BATCH_REPEATS.format(
        outer_target=outer_target,
        outer_iter=outer_iter,
        inner_target=inner_target,
        inner_iter=inner_iter,
        call=call,
        mark="",
    )
    assert_marked(source, "TD205")


def test_td205_quiet_for_sampled_subnets_of_one_batch_seeded_by_their_index() -> None:
    """Once-for-All's progressive shrinking: per batch of the loader, a few subnets are
    sampled (the inner index only builds their seed), each loss backpropagated and kept
    in a list rebuilt for every batch. Passing the index to the model would be data."""
    source = """
        import random

        def train(net, loader, optimizer, criterion, subnets):
            for i, (images, labels) in enumerate(loader):
                net.zero_grad()
                losses = []
                for k in range(subnets):
                    random.seed(int("%d%.3d" % (i, k)))
                    net.sample_active_subnet()
                    loss = criterion(net(images), labels)
                    losses.append(loss)  {mark}
                    loss.backward()
                optimizer.step()
                print(sum(float(l) for l in losses))
        """
    assert_marked(source.format(mark=""), "TD205")
    # Fed one slice of the batch each, the subnets still share the step after the loop;
    # stepping inside the loop makes each slice a training step of its own.
    fed = source.replace("net(images)", "net(images[k])")
    assert_marked(fed.format(mark=""), "TD205")
    step_per_slice = "loss.backward()\n                    optimizer.step()"
    stepped = fed.replace("loss.backward()", step_per_slice)
    assert_marked(stepped.format(mark="# expect: TD205"), "TD205")


def test_td205_quiet_for_sub_batch_losses_kept_until_the_step_after_them() -> None:
    """pytorch_image_classification's batch subdivision: each batch is cut into chunks,
    each chunk's loss backpropagated and kept in a list made anew for the batch, then
    one optimizer step and ``sum(losses).item()`` to log. The list lives one step."""
    source = """
        def train(model, loader, optimizer, loss_func, subdivide):
            for step, (data, targets) in enumerate(loader):
                data_chunks, target_chunks = subdivide(data, targets)
                optimizer.zero_grad()
                outputs = []
                losses = []
                for data_chunk, target_chunk in zip(data_chunks, target_chunks):
                    output_chunk = model(data_chunk)
                    outputs.append(output_chunk)
                    loss = loss_func(output_chunk, target_chunk)
                    losses.append(loss)
                    loss.backward()
                optimizer.step()
                loss = sum(losses)
                print(step, loss.item())
        """
    assert_marked(source, "TD205")


_SUB_BATCHES = """
    def train(model, loader, optimizer, loss_fn, split, epochs):
        for epoch in range(epochs):
            {epoch_reset}
            for step, (data, targets) in enumerate(loader):
                optimizer.zero_grad()
                {batch_reset}
                for data_chunk, target_chunk in zip(split(data), split(targets)):
                    loss = loss_fn(model(data_chunk), target_chunk)
                    losses.append(loss)  {mark}
                    total += loss  {mark}
                    loss.backward()
                    {chunk_step}
                {batch_step}
                print(step, float(total), len(losses))
    """


@pytest.mark.parametrize(
    ("epoch_reset", "batch_reset", "chunk_step", "batch_step", "flagged"),
    [
        # made anew for every batch, one step after the chunks: one step's losses
        ("pass", "losses, total = [], 0.0", "pass", "optimizer.step()", False),
        # made anew per epoch only: every step's losses stay until the epoch ends
        ("losses, total = [], 0.0", "pass", "pass", "optimizer.step()", True),
        # each chunk is a step of its own: the batch's list outlives steps
        ("pass", "losses, total = [], 0.0", "optimizer.step()", "pass", True),
        # made anew only every tenth batch: ten steps' graphs
        ("pass", "if step % 10 == 0: losses, total = [], 0.0", "pass", "optimizer.step()", True),
    ],
)
def test_td205_a_holder_made_anew_per_step_outside_the_accumulating_loop(
    epoch_reset: str, batch_reset: str, chunk_step: str, batch_step: str, flagged: bool
) -> None:
    source = _SUB_BATCHES.format(
        epoch_reset=epoch_reset,
        batch_reset=batch_reset,
        chunk_step=chunk_step,
        batch_step=batch_step,
        mark="# expect: TD205" if flagged else "",
    )
    assert_marked(source, "TD205")


@pytest.mark.parametrize(
    ("outer_target", "outer_iter", "inner_target", "inner_iter", "call"),
    [
        # an epoch total reset per chunk of a dataset: the inner loop draws the batches
        ("chunk", "chunks", "x, y", "chunk", "model_d(x), y"),
        # an outer count, not batches: the total lives for the whole epoch
        ("epoch_part", "range(3)", "_", "range(repeats)", "model_d(loader)"),
    ],
)
def test_td205_still_flags_a_total_over_the_batches_an_inner_loop_draws(
    outer_target: str, outer_iter: str, inner_target: str, inner_iter: str, call: str
) -> None:
    source = _PER_BATCH_REPEATS.format(
        outer_target=outer_target,
        outer_iter=outer_iter,
        inner_target=inner_target,
        inner_iter=inner_iter,
        call=call,
        mark="# expect: TD205",
    )
    assert_marked(source, "TD205")


@pytest.mark.parametrize(
    "rebind",
    ["loss = loss.detach().cpu().numpy()", "loss = loss.item()", "loss = float(loss)"],
)
def test_td205_quiet_when_the_loss_is_rebound_to_a_number_before_the_sum(rebind: str) -> None:
    source = f"""
        def train(model, loader, optimizer, criterion):
            loss_accum = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                {rebind}
                loss_accum += loss
            return loss_accum
        """
    assert_marked(source, "TD205")


def test_td205_still_flags_a_sum_before_the_loss_is_rebound() -> None:
    source = """
        def train(model, loader, optimizer, criterion):
            loss_accum = 0
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                loss_accum += loss  # expect: TD205
                loss = loss.item()
            return loss_accum
        """
    assert_marked(source, "TD205")


def test_td205_quiet_for_task_losses_stacked_and_backpropagated_after_the_loop() -> None:
    """Second-order MAML: one meta-step keeps its tasks' losses, with their graphs, and
    backpropagates their mean after the loop; the graphs are the algorithm."""
    source = """
        import torch
        def meta_step(model, tasks, optimiser, loss_fn, inner):
            task_losses = []
            for x_train, x_val in tasks:
                fast = inner(model, x_train)
                loss = loss_fn(model.functional_forward(x_val, fast))
                loss.backward(retain_graph=True)
                task_losses.append(loss)
            optimiser.zero_grad()
            meta_loss = torch.stack(task_losses).mean()
            meta_loss.backward()
            optimiser.step()
            return meta_loss
        """
    assert_marked(source, "TD205")


def test_td205_flags_a_history_only_printed_after_the_loop() -> None:
    source = """
        def train(model, loader, optimiser, loss_fn):
            history = []
            for x, y in loader:
                optimiser.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimiser.step()
                history.append(loss)  # expect: TD205
            print(sum(history) / len(history))
        """
    assert_marked(source, "TD205")


@pytest.mark.parametrize("convert", ["utils.to_scalar(loss)", "to_np(loss)", "to_numpy(loss)"])
def test_td205_quiet_for_a_helper_that_converts_the_loss_to_a_number(convert: str) -> None:
    """RAdam's language model: ``full_epoch_loss += utils.to_scalar(loss)``, a helper
    returning ``loss.data.tolist()[0]``, a float with no graph."""
    source = f"""
        def train(model, loader, optimizer, utils, to_np, to_numpy):
            total = 0
            for x, y in loader:
                optimizer.zero_grad()
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                total += {convert}
            return total
        """
    assert_marked(source, "TD205")


GAN_WITH_ONE_OPTIMIZER = """
import torch
from torch import nn

def train(model, data, optimizer):
    bce = nn.BCELoss()
    for d in data:
        model.discriminator.zero_grad()
        _, real, fake = model(d)
        dl = bce(real, torch.ones_like(real)) + bce(fake, torch.zeros_like(fake))
        dl.backward()
        {clear}
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("clear", "flagged"),
    [
        # TranAD: one optimizer over both parts; clearing the generator's gradients
        # after the discriminator's backward makes the step update the discriminator
        ("model.generator.zero_grad()", False),
        # clearing the whole model, or the optimizer, leaves the step nothing
        ("model.zero_grad()  # expect: TD203", True),
        ("optimizer.zero_grad()  # expect: TD203", True),
    ],
)
def test_td203_clearing_one_part_of_the_model_the_loop_runs_is_deliberate(
    clear: str, flagged: bool
) -> None:
    assert_marked(GAN_WITH_ONE_OPTIMIZER.format(clear=clear), "TD203")


@pytest.mark.parametrize(
    ("optimizer", "flagged"),
    [
        # FedPAC: the shared optimizer over the whole model; the classifier's gradients
        # are cleared so the step trains the feature extractor alone
        ("torch.optim.SGD(model.parameters(), lr=0.1)", False),
        # an optimizer over the classifier alone: clearing it leaves the step nothing
        ("torch.optim.SGD(model.classifier.parameters(), lr=0.1)", True),
    ],
)
def test_td203_a_cleared_part_the_step_does_not_rely_on_alone(
    optimizer: str, flagged: bool
) -> None:
    source = f"""
import torch

def fit(model, loader, criterion):
    optimizer = {optimizer}
    for x, y in loader:
        features = model.get_last_features(x)
        loss = criterion(model.classifier(features), y)
        optimizer.zero_grad()
        loss.backward()
        model.classifier.zero_grad(){"  # expect: TD203" if flagged else ""}
        optimizer.step()
"""
    assert_marked(source, "TD203")


SKIP_ON_EXPLODING_NORM = """
import torch

def update(model, opt, scaler, batches, max_norm, skip_grad):
    for data in batches:
        loss = model(data).sum()
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if norm > max_norm and skip_grad:
            opt.zero_grad(set_to_none=True){mark}
            scaler.step(opt)
            scaler.update()
            {leave}
        scaler.step(opt)
        scaler.update()
"""


def test_td203_a_branch_that_skips_the_update_and_leaves_is_quiet() -> None:
    """imaginaire: on an exploding gradient norm the trainer clears the gradients, lets
    the scaler step over nothing (keeping its bookkeeping) and breaks; the regular path
    steps with the gradients. Without the ``break`` the cleared gradients reach the
    loop's own step."""
    assert_marked(SKIP_ON_EXPLODING_NORM.format(mark="", leave="break"), "TD203")
    assert_marked(SKIP_ON_EXPLODING_NORM.format(mark="", leave="continue"), "TD203")
    assert_marked(SKIP_ON_EXPLODING_NORM.format(mark="  # expect: TD203", leave="pass"), "TD203")


MICRO_BATCHES = """
import torch

def train_batch(engine, data_iter, {bound}):
    total_loss = 0.0
    for _ in range({count}):
        input_ids = next(data_iter)
        loss = engine(input_ids).mean()
        engine.backward(loss)
        engine.step()
        total_loss += loss{mark}
    return total_loss / {count}
"""


def test_td205_a_sum_over_one_steps_micro_batches_is_bounded() -> None:
    """archai's DeepSpeed trainer: the loop runs the micro-batches of one optimizer step
    and the sum is returned at the end of the step. A loop over the data keeps growing."""
    bounded = MICRO_BATCHES.format(
        bound="gradient_accumulation_steps", count="gradient_accumulation_steps", mark=""
    )
    assert_marked(bounded, "TD205")
    growing = MICRO_BATCHES.format(bound="steps", count="steps", mark="  # expect: TD205")
    assert_marked(growing, "TD205")
