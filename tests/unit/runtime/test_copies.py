"""TD623 / TD624: copies of the trained model (EMA, target networks) that never change,
drift away, or are trained by the optimizer too.

Each bug is written in three shapes: a plain loop, a trainer class whose steps live in
helpers, and a callback (a Lightning-style ``on_train_batch_end`` hook) that updates the
copy from outside the loop. The quiet cases are the correct patterns that look alike: an
EMA with decay 0.999 (changes slowly), a target synced every 100 steps (and a run shorter
than that), a frozen teacher, a reference copy read every step, a best-model snapshot,
an ensemble built by deepcopy.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

import torchdoctor  # noqa: E402
from torchdoctor.runtime.detectors import copies, copy_verdicts  # noqa: E402

STEPS = 120


def data() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(32, 8)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def net() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))


def ema_step(ema: nn.Module, model: nn.Module, decay: float, weighted: bool = True) -> None:
    with torch.no_grad():
        for e, p in zip(ema.parameters(), model.parameters(), strict=True):
            e.mul_(decay).add_(p, alpha=(1 - decay) if weighted else 1.0)


def findings(report: Any, code: str) -> list[Any]:
    return [f for f in report.findings if f.code == code]


# -- EMA: a plain loop ------------------------------------------------------------------------


def ema_loop(decay: float, weighted: bool = True, steps: int = STEPS) -> Any:
    model = net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    with torchdoctor.watch(sample_every=4) as session:
        ema = copy.deepcopy(model)
        for _ in range(steps):
            optimizer.zero_grad()
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            ema_step(ema, model, decay, weighted)
    return session.report


def test_ema_with_decay_one_is_flagged_at_its_deepcopy() -> None:
    report = ema_loop(decay=1.0)
    (finding,) = findings(report, "TD623")
    assert "never changed" in finding.message
    assert "`ema`" in finding.message and "copy.deepcopy" in finding.message
    assert finding.location.path and finding.location.path.endswith("test_copies.py")
    assert "ema = copy.deepcopy(model)" in (finding.location.snippet or "")
    assert finding.evidence["written_intervals"] >= copy_verdicts.MIN_WRITES
    assert finding.evidence["original_moved"] > 0


def test_ema_with_decay_0999_changes_slowly_and_is_quiet() -> None:
    assert not findings(ema_loop(decay=0.999), "TD623")


def test_ema_adding_unweighted_weights_drifts() -> None:
    (finding,) = findings(ema_loop(decay=0.99, weighted=False), "TD623")
    assert "drifts away" in finding.message


def test_a_short_run_gives_no_verdict() -> None:
    assert not findings(ema_loop(decay=1.0, steps=20), "TD623")


# -- DQN target networks: a trainer class --------------------------------------------------


class DQN:
    def __init__(self, sync_every: int, sync_from_self: bool = False) -> None:
        self.q = net()
        self.target = net()
        self.target.load_state_dict(self.q.state_dict())
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=1e-2)
        self.sync_every, self.sync_from_self = sync_every, sync_from_self
        self.steps = 0

    def _targets(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return 0.5 + 0.9 * self.target(x).max(1).values

    def _sync(self) -> None:
        source = self.target if self.sync_from_self else self.q
        self.target.load_state_dict(source.state_dict())

    def _update(self) -> None:
        x, _ = data()
        q = self.q(x).max(1).values
        self.optimizer.zero_grad()
        F.mse_loss(q, self._targets(x)).backward()
        self.optimizer.step()
        self.steps += 1
        if self.steps % self.sync_every == 0:
            self._sync()

    def fit(self, steps: int) -> None:
        for _ in range(steps):
            self._update()


def dqn(sync_every: int, sync_from_self: bool = False, steps: int = STEPS) -> Any:
    with torchdoctor.watch(sample_every=4) as session:
        DQN(sync_every, sync_from_self).fit(steps)
    return session.report


def test_target_synced_from_itself_is_flagged() -> None:
    (finding,) = findings(dqn(sync_every=1, sync_from_self=True), "TD623")
    assert "never changed" in finding.message
    assert "identical to it when first checked" in finding.message


def test_target_synced_every_step_is_quiet() -> None:
    assert not findings(dqn(sync_every=1), "TD623")


def test_target_synced_every_100_steps_is_quiet() -> None:
    assert not findings(dqn(sync_every=100, steps=250), "TD623")


def test_run_shorter_than_the_sync_period_is_quiet() -> None:
    assert not findings(dqn(sync_every=1000), "TD623")


# -- a Lightning-style callback that keeps the EMA --------------------------------------------


class EMACallback:
    def __init__(self, decay: float) -> None:
        self.decay = decay
        self.ema: nn.Module | None = None

    def on_fit_start(self, model: nn.Module) -> None:
        self.ema = copy.deepcopy(model)

    def on_train_batch_end(self, model: nn.Module) -> None:
        assert self.ema is not None
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), model.parameters(), strict=True):
                e.lerp_(p, 1 - self.decay)


def fit_with_callbacks(callbacks: list[Any], steps: int = STEPS) -> Any:
    model = net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torchdoctor.watch(sample_every=4) as session:
        for callback in callbacks:
            callback.on_fit_start(model)
        for _ in range(steps):
            optimizer.zero_grad()
            x, y = data()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            for callback in callbacks:
                callback.on_train_batch_end(model)
    return session.report


def test_callback_ema_with_weight_zero_is_flagged() -> None:
    assert findings(fit_with_callbacks([EMACallback(decay=1.0)]), "TD623")


def test_callback_ema_is_quiet() -> None:
    assert not findings(fit_with_callbacks([EMACallback(decay=0.999)]), "TD623")


# -- copies that are correct and never change ---------------------------------------------


class FrozenCopy:
    """A copy read at every step and never written: a teacher, a proximal term's anchor."""

    def __init__(self, use: str) -> None:
        self.use = use
        self.copy: nn.Module | None = None

    def on_fit_start(self, model: nn.Module) -> None:
        self.copy = copy.deepcopy(model).requires_grad_(False)

    def on_train_batch_end(self, model: nn.Module) -> None:
        assert self.copy is not None
        if self.use == "forward":
            with torch.no_grad():
                self.copy(torch.randn(4, 8))
        else:
            pairs = zip(model.parameters(), self.copy.parameters(), strict=True)
            sum(((p - q) ** 2).sum() for p, q in pairs)


@pytest.mark.parametrize("use", ["forward", "parameters"])
def test_frozen_copy_used_every_step_is_quiet(use: str) -> None:
    assert not findings(fit_with_callbacks([FrozenCopy(use)]), "TD623")


class BestSnapshot:
    def __init__(self) -> None:
        self.best: nn.Module | None = None
        self.calls = 0

    def on_fit_start(self, model: nn.Module) -> None:
        pass

    def on_train_batch_end(self, model: nn.Module) -> None:
        self.calls += 1
        if self.calls % 10 == 0:
            self.best = copy.deepcopy(model)


def test_best_snapshot_is_quiet() -> None:
    assert not findings(fit_with_callbacks([BestSnapshot()]), "TD623")


def test_pretrained_teacher_is_quiet() -> None:
    teacher = net()
    with torch.no_grad():
        for p in teacher.parameters():
            p.mul_(2.0)  # other weights than the student's: loaded from elsewhere
    student = net()
    optimizer = torch.optim.SGD(student.parameters(), lr=0.05)
    with torchdoctor.watch(sample_every=4) as session:
        for _ in range(STEPS):
            x, y = data()
            with torch.no_grad():
                soft = teacher(x).softmax(-1)
            loss = F.cross_entropy(student(x), y) + F.mse_loss(student(x).softmax(-1), soft)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert not findings(session.report, "TD623")


# -- TD624: a target network the optimizer trains -------------------------------------------


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = net()
        self.target = copy.deepcopy(self.q)


def agent_loop(only_q: bool, detach: bool, steps: int = STEPS) -> Any:
    with torchdoctor.watch(sample_every=4) as session:
        agent = Agent()
        params = agent.q.parameters() if only_q else agent.parameters()
        optimizer = torch.optim.Adam(params, lr=1e-2)
        for _ in range(steps):
            x, _ = data()
            nxt = agent.target(x).max(1).values
            target = 0.5 + 0.9 * (nxt.detach() if detach else nxt)
            optimizer.zero_grad()
            F.mse_loss(agent.q(x).max(1).values, target).backward()
            optimizer.step()
            ema_step(agent.target, agent.q, 0.99)
    return session.report


def test_target_in_the_optimizer_is_flagged() -> None:
    (finding,) = findings(agent_loop(only_q=False, detach=False), "TD624")
    assert "param_groups" in finding.message
    assert "self.target = copy.deepcopy(self.q)" in (finding.location.snippet or "")
    assert not findings(agent_loop(only_q=False, detach=False), "TD623")


def test_target_outside_the_optimizer_is_quiet() -> None:
    report = agent_loop(only_q=True, detach=True)
    assert not findings(report, "TD624") and not findings(report, "TD623")


def test_target_in_the_optimizer_without_gradients_is_quiet() -> None:
    assert not findings(agent_loop(only_q=False, detach=True), "TD624")


def test_ensemble_of_deepcopies_trained_together_is_quiet() -> None:
    with torchdoctor.watch(sample_every=4) as session:
        first = net()
        members = [first] + [copy.deepcopy(first) for _ in range(2)]
        for member in members[1:]:
            with torch.no_grad():
                for p in member.parameters():
                    p.add_(torch.randn_like(p) * 0.1)
        optimizer = torch.optim.Adam([p for m in members for p in m.parameters()], lr=1e-2)
        for _ in range(STEPS):
            x, y = data()
            optimizer.zero_grad()
            sum(F.cross_entropy(m(x), y) for m in members).backward()
            optimizer.step()
    assert not findings(session.report, "TD624")


# -- the deepcopy hook ---------------------------------------------------------------------


def test_deepcopy_is_unchanged_and_the_hook_goes_away() -> None:
    model = net()
    with torchdoctor.watch():
        made = copy.deepcopy(model)
        assert "__deepcopy__" in vars(nn.Module)
    assert "__deepcopy__" not in vars(nn.Module)
    assert made is not model and made[0] is not model[0]
    for a, b in zip(made.parameters(), model.parameters(), strict=True):
        assert torch.equal(a, b) and a is not b
    assert copy.deepcopy([model, model])[0] is not model


def test_a_failing_hook_never_breaks_the_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("boom")

    from torchdoctor.runtime import model_copies

    monkeypatch.setattr(model_copies.CopyOrigins, "_made", boom)
    with torchdoctor.watch() as session:
        made = copy.deepcopy(net())
    assert isinstance(made, nn.Sequential)
    assert "TD001" in session.report.codes()


def test_copies_made_by_torchdoctor_itself_are_not_recorded() -> None:
    from torchdoctor.runtime import model_copies

    own = compile("copy.deepcopy(module)", model_copies.__file__, "exec")  # "our" code
    with torchdoctor.watch(sample_every=1):
        copy.deepcopy(net())  # the user's: recorded
        exec(own, {"copy": copy, "module": net()})
        (detector,) = _live_copies_detectors()
        assert detector.origins is not None
        assert detector.origins.made == 1


def _live_copies_detectors() -> list[Any]:
    from torchdoctor.runtime.monitor import active_monitor

    monitor = active_monitor()
    assert monitor is not None
    return [d for d in monitor.dispatch.detectors if isinstance(d, copies.ModelCopies)]


class OffloadedReference(FrozenCopy):
    """A reference copy moved out of the way between uses: new storage, no new values."""

    def on_train_batch_end(self, model: nn.Module) -> None:
        assert self.copy is not None
        self.copy.double()
        with torch.no_grad():
            self.copy.float()(torch.randn(4, 8))


def test_reference_copy_moved_between_uses_is_quiet() -> None:
    assert not findings(fit_with_callbacks([OffloadedReference("forward")]), "TD623")


def test_a_module_parametrized_while_watched_still_deep_copies() -> None:
    from torch.nn.utils import parametrize

    class Symmetric(nn.Module):
        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            return weight.triu() + weight.triu(1).transpose(0, 1)

    with torchdoctor.watch() as session:
        layer = nn.Linear(4, 4)
        parametrize.register_parametrization(layer, "weight", Symmetric())
        made = copy.deepcopy(layer)
    assert made is not layer and parametrize.is_parametrized(made)
    assert torch.equal(made.weight, layer.weight)
    assert made.parametrizations.weight.original is not layer.parametrizations.weight.original
    assert "TD001" not in session.report.codes()


def test_a_module_parametrized_while_watched_deep_copies_after_the_run() -> None:
    # parametrize gives its class no __deepcopy__ of its own while ours is on nn.Module;
    # once ours is gone, a copy must still work as it does in a run never watched.
    from torch.nn.utils import parametrize

    class Doubled(nn.Module):
        def forward(self, weight: torch.Tensor) -> torch.Tensor:
            return 2 * weight

    with torchdoctor.watch():
        layer = nn.Linear(3, 3)
        parametrize.register_parametrization(layer, "weight", Doubled())
    assert "__deepcopy__" not in vars(nn.Module)
    made = copy.deepcopy(layer)
    assert made is not layer and torch.equal(made.weight, layer.weight)
    assert made.parametrizations.weight.original is not layer.parametrizations.weight.original
