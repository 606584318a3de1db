"""The monitor's guarantees: results unchanged, hooks removed, failures contained."""

from __future__ import annotations

import importlib
import warnings

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp, step  # noqa: E402
from torchdoctor.errors import UsageError  # noqa: E402
from torchdoctor.findings import Depth  # noqa: E402
from torchdoctor.rules.detectors import DetectorInfo  # noqa: E402
from torchdoctor.runtime import monitor as monitor_module  # noqa: E402
from torchdoctor.runtime.detectors.base import RuntimeDetector, StepEvent  # noqa: E402
from torchdoctor.runtime.stats import StepStats  # noqa: E402


def hook_state() -> tuple[object, ...]:
    module_hooks = importlib.import_module("torch.nn.modules.module")
    optim = importlib.import_module("torch.optim.optimizer")
    loader = torch.utils.data.dataloader._BaseDataLoaderIter
    return (
        len(module_hooks._global_forward_pre_hooks),
        len(module_hooks._global_forward_hooks),
        len(optim._global_optimizer_pre_hooks),
        len(optim._global_optimizer_post_hooks),
        torch.autograd.backward,
        loader.__next__,
        warnings.showwarning,
    )


def training_run(watched: bool, **options: object) -> tuple[list[float], dict, object]:
    """A seeded run using dropout, BatchNorm, a shuffling DataLoader and Adam."""
    torch.manual_seed(0)
    model = mlp(dropout=0.3, batchnorm=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.utils.data.TensorDataset(*batch(256))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    losses: list[float] = []

    def train() -> None:
        for _ in range(3):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
            model.eval()
            with torch.no_grad():
                losses.append(float(model(data.tensors[0]).sum()))

    if watched:
        with torchdoctor.watch(**options):  # type: ignore[arg-type]
            train()
    else:
        train()
    return losses, model.state_dict(), torch.get_rng_state()


@pytest.mark.parametrize(
    "options",
    [{}, {"sample_every": 1, "localise_non_finite": True}],
    ids=["default", "everything-on"],
)
def test_watching_never_changes_training_results(options: dict) -> None:
    plain_losses, plain_state, plain_rng = training_run(False)
    losses, state, rng = training_run(True, **options)
    assert losses == plain_losses  # bitwise: floats compared exactly
    assert all(torch.equal(state[k], plain_state[k]) for k in plain_state)
    assert torch.equal(rng, plain_rng)


def test_modes_flags_and_grads_are_left_alone() -> None:
    torch.manual_seed(0)
    model = mlp(dropout=0.2, batchnorm=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[0].weight.requires_grad_(False)
    with torchdoctor.watch(sample_every=1):
        for _ in range(5):
            step(model, optimizer)
        model.eval()
    assert not model.training and not any(m.training for m in model.modules())
    assert not model[0].weight.requires_grad
    assert model[-1].weight.grad is not None


def test_every_hook_is_removed_even_after_an_error() -> None:
    before = hook_state()
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ZeroDivisionError), torchdoctor.watch(status=True):
        step(model, optimizer)
        1 / 0  # noqa: B018
    assert hook_state() == before


def test_max_steps_stops_cleanly_and_the_code_after_the_block_runs() -> None:
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    reached = []
    with torchdoctor.watch(max_steps=7) as w:
        for _ in range(100):
            step(model, optimizer)
    reached.append(w.step)
    assert reached == [7]
    assert w.report.facts["stopped_at_max_steps"] == 7


def test_watch_blocks_do_not_nest_but_follow_each_other() -> None:
    with torchdoctor.watch(), pytest.raises(UsageError), torchdoctor.watch():
        pass
    with torchdoctor.watch() as w:
        step(mlp(), torch.optim.SGD(mlp().parameters(), lr=0.1))
    assert w.report.command == "watch"


class Exploding(RuntimeDetector):
    calls = 0

    def on_step_end(self, event: StepEvent) -> None:
        Exploding.calls += 1
        raise RuntimeError("boom")


def test_a_failing_detector_is_reported_once_and_switched_off(monkeypatch) -> None:
    real = monitor_module.registered_detectors
    monkeypatch.setattr(
        monitor_module,
        "registered_detectors",
        lambda depth: [*real(depth), DetectorInfo(("TD612",), Depth.RUN, Exploding)],
    )
    Exploding.calls = 0
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(30):
            x, y = batch()
            nn.functional.cross_entropy(model(x), y).backward()  # never cleared: TD201
            optimizer.step()
    [internal] = w.report.by_code("TD001")
    assert "Exploding" in internal.message and "boom" in internal.message
    assert Exploding.calls == 1
    assert w.report.by_code("TD201")  # the other detectors carried on


def test_a_monitor_failure_never_reaches_the_training_code(monkeypatch) -> None:
    def broken(self: StepStats) -> None:
        raise ValueError("broken statistics")

    monkeypatch.setattr(StepStats, "before", broken)
    plain_losses, plain_state, _ = training_run(False)
    losses, state, _ = training_run(True)
    assert losses == plain_losses
    assert all(torch.equal(state[k], plain_state[k]) for k in plain_state)


def test_models_are_found_and_named() -> None:
    torch.manual_seed(0)

    class Generator(nn.Sequential):
        pass

    class Critic(nn.Sequential):
        pass

    generator = Generator(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
    critic = Critic(nn.Linear(8, 1))
    opt_g = torch.optim.SGD(generator.parameters(), lr=0.1)
    opt_c = torch.optim.SGD(critic.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(4):
            opt_c.zero_grad()
            critic(generator(torch.randn(2, 4)).detach()).mean().backward()
            opt_c.step()
            opt_g.zero_grad()
            critic(generator(torch.randn(2, 4))).mean().backward()
            opt_g.step()
        monitor = monitor_module.active_monitor()
        assert monitor is not None
        assert monitor.module_path(generator[2]) == "Generator.2"
        assert monitor.param_name(critic[0].weight) == "Critic.0.weight"
        assert [m.label for m in monitor.models] == ["Generator", "Critic"]
    assert {o["name"] for o in w.report.facts["optimizers"]} == {"SGD", "SGD #2"}


def test_explicit_model_skips_discovery_hooks() -> None:
    model = mlp()
    hooks = importlib.import_module("torch.nn.modules.module")._global_forward_pre_hooks
    with torchdoctor.watch(model=model):
        assert not [h for h in hooks.values() if getattr(h, "__name__", "") == "_discover"]
        assert not model._forward_pre_hooks  # the root hook is global: the model stays as is
        step(model, torch.optim.SGD(model.parameters(), lr=0.1))
        monitor = monitor_module.active_monitor()
        assert monitor is not None and monitor.module_path(model[0]) == "0"


def test_forked_dataloader_workers_run_under_the_monitor() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(*batch(64))
    loader = torch.utils.data.DataLoader(
        data, batch_size=16, num_workers=2, multiprocessing_context="fork"
    )
    with torchdoctor.watch() as w:
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    assert w.report.facts["steps"] == 4 and w.report.facts["batches"] == 4
    assert not w.report.by_code("TD001")


def test_each_backward_line_gets_its_own_loss_curve() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(5):
            x, y = batch()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            torch.autograd.backward([model(x).pow(2).mean() * 1e-3])
            optimizer.step()
    curves = {
        name: len(values) for name, values in w.report.series.items() if name.startswith("loss")
    }  # the other curves are the run's (grad_norm, ...)
    assert len(curves) == 2 and set(curves.values()) == {5}
    assert all(name.startswith("loss@test_monitor.py:") for name in curves)


def test_the_run_script_is_user_code_even_inside_torchdoctor() -> None:
    from torchdoctor.demo import SCRIPT

    run = monitor_module.Monitor(monitor_module.MonitorOptions(command="run", script=SCRIPT))
    assert run.is_user_file(str(SCRIPT))
    assert not run.is_user_file(monitor_module.__file__)
    assert not monitor_module.Monitor().is_user_file(str(SCRIPT))


def test_the_users_model_is_freed_when_the_watch_ends_without_waiting_for_gc() -> None:
    """Nothing of the monitor keeps the model: not its own reference cycles (collected late,
    perhaps inside a forked DataLoader worker, where a DDP process group's destructor
    hangs), nor a wrapper that someone looked up while it was installed."""
    import gc
    import weakref

    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    gc.disable()
    try:
        with torchdoctor.watch() as watched:
            for _ in range(12):
                step(model, optimizer)
            kept_wrapper = torch.autograd.backward  # as torch._dynamo's rule cache keeps it
        assert watched.report.facts.get("steps")
        gone = weakref.ref(model)
        del model, optimizer, watched
        assert gone() is None
    finally:
        gc.enable()
    assert kept_wrapper is not torch.autograd.backward
    x = torch.ones(2, requires_grad=True)
    kept_wrapper([(x * 3).sum()])  # the stale wrapper still calls straight through
    assert x.grad.tolist() == [3.0, 3.0]


def test_a_run_with_a_ddp_model_lets_go_of_the_gil_before_releasing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gloo worker may still be destroying the last allreduce's work, which needs the
    GIL, when the run ends; releasing the DDP model can destroy its process group, whose
    destructor joins that worker while holding the GIL. The monitor lets the GIL go
    first, and only for runs that built DDP models."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    slept: list[float] = []
    monkeypatch.setattr(monitor_module.time, "sleep", slept.append)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch():
        for _ in range(3):
            step(model, optimizer)
    assert slept == []

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        ddp = DistributedDataParallel(mlp())
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        with torchdoctor.watch():
            for _ in range(3):
                step(ddp, optimizer)
        del ddp, optimizer
    finally:
        dist.destroy_process_group()
    assert slept == [monitor_module._SETTLE_S]
