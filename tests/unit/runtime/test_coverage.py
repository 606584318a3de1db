"""Parameters that never get a gradient (TD208), are in no optimizer (TD601, at run time) or
never change (TD218)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn

import torchdoctor  # noqa: E402
from tests.unit.runtime.training import batch, mlp, step  # noqa: E402
from torchdoctor.findings import Depth, Severity  # noqa: E402

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


class WithAuxiliaryHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(8, 32)
        self.aux = nn.Linear(32, 4)  # marker: aux-head
        self.head = nn.Linear(32, 3)  # marker: head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))  # `aux` is never used


def train(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int = 12) -> None:
    for _ in range(steps):
        step(model, optimizer)


def test_unused_layer_is_named_at_its_definition() -> None:
    torch.manual_seed(0)
    model = WithAuxiliaryHead()
    with torchdoctor.watch() as w:
        train(model, torch.optim.Adam(model.parameters(), lr=1e-3))
    [found] = w.report.by_code("TD208")
    assert found.location.object == "aux"
    assert (found.location.path, found.location.line) == (HERE, line_of("marker: aux-head"))
    assert "`aux` (2 parameters)" in found.message


def test_layer_replaced_after_the_optimizer_is_an_optimizer_of_copies() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(32, 3)  # a new head; the optimizer keeps stepping the old one
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD620")
    assert found.evidence["model_parameters"] == ["2.weight", "2.bias"]
    assert not w.report.by_code("TD601")


def test_layer_replaced_after_the_optimizer_is_missing_from_it() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[2] = nn.Linear(32, 4)  # unknown to the optimizer, and of another size
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD601")
    assert found.depth is Depth.RUN and found.severity is Severity.ERROR
    assert "in no optimizer" in found.message and "`2`" in found.message
    assert found.location.object == "2"
    assert found.evidence["parameters"] == ["2.weight", "2.bias"]
    assert "add_param_group({'params': ...})" in found.fix_hint  # not doubled braces
    assert "max_grad_norm" not in found.evidence  # never sampled: no made-up zero
    assert not w.report.by_code("TD218") and not w.report.by_code("TD208")


def test_parameters_missing_from_the_optimizer_point_at_their_assignment() -> None:
    torch.manual_seed(0)
    model = WithAuxiliaryHead()
    model.aux = nn.Identity()  # out of the way: only the head is in question here
    optimizer = torch.optim.Adam(model.body.parameters(), lr=1e-3)
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD601")
    assert found.location.object == "head"
    assert (found.location.path, found.location.line) == (HERE, line_of("marker: head"))
    assert "`head` (2 parameters)" in found.message
    assert not w.report.by_code("TD218")


def test_groups_chosen_by_name_that_miss_parameters_are_missing_from_the_optimizer() -> None:
    torch.manual_seed(0)
    model = mlp(batchnorm=True)
    named = list(model.named_parameters())
    optimizer = torch.optim.AdamW(  # "1.weight" (the BatchNorm scale) fits neither filter
        [
            {"params": [p for n, p in named if n in {"0.weight", "3.weight"}]},
            {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0},
        ],
        lr=1e-3,
    )
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD601")
    assert found.evidence["parameters"] == ["1.weight"]
    assert "`1.weight`" in found.message
    assert not w.report.by_code("TD218")


def test_parameter_group_with_zero_lr_never_changes() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.0}], lr=0.1
    )
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD218")
    assert "learning rate of their parameter group is 0" in found.message
    assert "`2`" in found.message
    assert not w.report.by_code("TD601")  # the optimizer holds them


def test_learning_rate_floored_to_zero_never_changes() -> None:
    torch.manual_seed(0)
    model = mlp()
    lr = 1e-3
    optimizer = torch.optim.Adam(
        [
            {"params": model[0].parameters(), "lr": lr // 10},
            {"params": model[2].parameters(), "lr": lr},
        ]
    )
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD218")
    assert found.depth is Depth.RUN and found.severity is Severity.WARNING
    assert "learning rate of their parameter group is 0" in found.message
    assert found.evidence["parameters"] == ["0.weight", "0.bias"]
    assert "`lr // 10`" in found.fix_hint
    assert not w.report.by_code("TD601")


def test_learning_rate_too_small_is_a_warning_next_to_a_cancelled_bias() -> None:
    torch.manual_seed(0)
    model = mlp(batchnorm=True)
    with torchdoctor.watch() as w:
        train(model, torch.optim.SGD(model.parameters(), lr=1e-9))
    found = {f.severity.name: f for f in w.report.by_code("TD218")}
    assert "float32 resolution" in found["WARNING"].message
    assert "0.bias" not in found["WARNING"].evidence["parameters"]
    assert found["INFO"].evidence["parameters"] == ["0.bias"]
    assert not w.report.by_code("TD601")


# -- quiet -----------------------------------------------------------------------------------


def test_frozen_backbone_on_purpose_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    for p in model[0].parameters():
        p.requires_grad_(False)
    with torchdoctor.watch() as w:
        train(model, torch.optim.Adam([p for p in model.parameters() if p.requires_grad]))
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_teacher_model_without_gradients_is_quiet() -> None:
    torch.manual_seed(0)
    student, teacher = mlp(), mlp()  # the teacher requires grad but is only run under no_grad
    optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)
    with torchdoctor.watch() as w:
        for _ in range(12):
            x, _ = batch()
            with torch.no_grad():
                target = teacher(x).softmax(-1)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(student(x), target)
            loss.backward()
            optimizer.step()
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_branch_used_now_and_then_is_quiet() -> None:
    torch.manual_seed(0)
    body, rare = nn.Linear(8, 3), nn.Linear(8, 3)
    model = nn.ModuleDict({"body": body, "rare": rare})
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for index in range(30):
            x, y = batch()
            optimizer.zero_grad()
            out = body(x) + (rare(x) if index % 7 == 3 else 0)
            nn.functional.cross_entropy(out, y).backward()
            optimizer.step()
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_linear_warmup_from_zero_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, s / 5))
    with torchdoctor.watch() as w:
        for _ in range(12):
            step(model, optimizer)
            scheduler.step()
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_part_of_the_model_in_the_optimizer_with_the_rest_frozen_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    model[0].requires_grad_(False)  # linear probing: only the head trains, on purpose
    with torchdoctor.watch() as w:
        train(model, torch.optim.SGD(model[2].parameters(), lr=0.1))
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_two_optimizers_sharing_the_model_are_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    body = torch.optim.SGD(model[0].parameters(), lr=0.1)
    head = torch.optim.Adam(model[2].parameters(), lr=1e-3)
    with torchdoctor.watch() as w:
        for _ in range(12):
            x, y = batch()
            body.zero_grad()
            head.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            body.step()
            head.step()
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_layer_updated_by_hand_outside_any_optimizer_is_quiet() -> None:
    # A layer trained by a hand-written SGD step (as in meta-learning inner loops) is in
    # no optimizer but changes every step: nothing is missing.
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(12):
            step(model, optimizer)
            with torch.no_grad():
                for param in model[2].parameters():
                    param.sub_(0.1 * param.grad)
                    param.grad = None
    assert not w.report.codes() & {"TD208", "TD218", "TD601"}


def test_too_short_runs_are_not_judged() -> None:
    torch.manual_seed(0)
    model = WithAuxiliaryHead()
    with torchdoctor.watch() as w:
        train(model, torch.optim.Adam(model.parameters()), steps=2)
    assert not w.report.by_code("TD208")


def test_too_short_runs_are_not_judged_for_missing_parameters() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model[2].parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        train(model, optimizer, steps=2)
    assert not w.report.by_code("TD601")


class ConvBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


@pytest.mark.parametrize("kind", ["linear", "conv"])
def test_bias_cancelled_by_a_following_batchnorm_is_info(kind: str) -> None:
    # Its gradient is rounding noise (~1e-8), not exactly zero, and SGD's updates of it
    # are below float32 resolution: a structural zero, not a learning-rate problem. At
    # lr=0.01, AVX-512 convolution kernels round differently and moved one bias element
    # near zero by 1e-9 (a real change, so nothing to report); at 0.001 none moves.
    torch.manual_seed(0)
    model = mlp(batchnorm=True) if kind == "linear" else ConvBlock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    with torchdoctor.watch() as w:
        for _ in range(20):
            x, y = batch()
            if kind == "conv":
                x = x.view(32, 1, 2, 4).expand(32, 3, 2, 4).contiguous()
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    [found] = w.report.by_code("TD218")
    assert found.severity.name == "INFO"
    assert "normalisation" in found.message and "learning rate" not in found.fix_hint
    assert found.evidence["normalisations"] == (["1"] if kind == "linear" else ["bn"])


class ClippedSGD(torch.optim.SGD):
    """A user-defined optimizer: its own ``__init__`` is not where it was built."""

    def __init__(self, params, lr: float) -> None:
        super().__init__(params, lr=lr)


@pytest.mark.parametrize(
    ("make", "marker"),
    [
        (
            lambda model: torch.optim.SGD(model[2].parameters(), lr=0.1),  # built: torch
            "built: torch",
        ),
        (
            lambda model: ClippedSGD(model[2].parameters(), lr=0.1),  # built: subclass
            "built: subclass",
        ),
    ],
    ids=["torch-optimizer", "user-subclass"],
)
def test_parameters_in_no_optimizer_point_at_the_line_that_built_it(make, marker) -> None:
    """Built while watched, the optimizer's construction line is where the fix goes; the
    monitor remembers it without keeping the optimizer alive."""
    import weakref

    torch.manual_seed(0)
    model = mlp()
    with torchdoctor.watch() as w:
        optimizer = make(model)
        train(model, optimizer)
    [found] = w.report.by_code("TD601")
    assert (found.location.path, found.location.line) == (HERE, line_of(marker))
    assert found.location.object == "0"
    gone = weakref.ref(optimizer)
    del optimizer
    assert gone() is None


def test_a_zero_learning_rate_points_at_the_line_that_built_the_optimizer() -> None:
    torch.manual_seed(0)
    model = mlp()
    with torchdoctor.watch() as w:
        optimizer = torch.optim.SGD(  # marker: groups
            [
                {"params": model[0].parameters(), "lr": 0.1 // 10},
                {"params": model[2].parameters()},
            ],
            lr=0.1,
        )
        train(model, optimizer)
    [found] = w.report.by_code("TD218")
    assert (found.location.path, found.location.line) == (HERE, line_of("marker: groups"))
    assert not w.report.by_code("TD601")


FUSED = {
    "AdamW": lambda params: torch.optim.AdamW(params, lr=1e-3, fused=True),
    "Adam": lambda params: torch.optim.Adam(params, lr=1e-3, fused=True),
    "SGD": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, fused=True),
}


def test_a_fused_kernel_updates_parameters_without_bumping_their_version() -> None:
    """The premise of the tests below, in plain torch: the version counter stays put."""
    param = nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([param], lr=0.1, fused=True)
    param.sum().backward()
    version = param._version
    optimizer.step()
    assert param._version == version
    assert not torch.equal(param.detach(), torch.ones(3))


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_optimizers_that_train_are_quiet(name: str) -> None:
    torch.manual_seed(0)
    model = mlp()
    with torchdoctor.watch() as w:
        train(model, FUSED[name](model.parameters()))
    assert not w.report.by_code("TD218") and not w.report.by_code("TD601")


@pytest.mark.parametrize("name", ["AdamW", "SGD"])
def test_foreach_optimizers_that_train_are_quiet(name: str) -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = getattr(torch.optim, name)(model.parameters(), lr=1e-2, foreach=True)
    with torchdoctor.watch() as w:
        train(model, optimizer)
    assert not w.report.by_code("TD218")


def test_layer_updated_through_data_outside_any_optimizer_is_quiet() -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = torch.optim.SGD(model[0].parameters(), lr=0.1)
    with torchdoctor.watch() as w:
        for _ in range(12):
            step(model, optimizer)
            for param in model[2].parameters():  # `.data` does not bump the version
                param.data.add_(param.grad, alpha=-0.1)
    assert not w.report.by_code("TD218") and not w.report.by_code("TD601")


@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_fused_optimizer_with_a_zero_learning_rate_still_never_changes(name: str) -> None:
    torch.manual_seed(0)
    model = mlp()
    optimizer = getattr(torch.optim, name)(
        [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.0}],
        lr=0.01,
        fused=True,
    )
    with torchdoctor.watch() as w:
        train(model, optimizer)
    [found] = w.report.by_code("TD218")
    assert "learning rate of their parameter group is 0" in found.message
    assert "`2`" in found.message


class Nudge(torch.optim.Optimizer):
    """Moves every value by ±1e-5, alternately up and down: a small, symmetric update."""

    def __init__(self, params: object) -> None:
        super().__init__(params, {})

    @torch.no_grad()
    def step(self, closure: object = None) -> None:  # type: ignore[override]
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    signs = torch.ones(param.numel()).reshape(param.shape)
                    signs.view(-1)[1::2] = -1
                    param.add_(1e-5 * signs)


def test_values_nudged_below_a_float32_norms_resolution_still_changed() -> None:
    # BatchNorm weights of 1.0 moved up and down keep their float32 norm to the last bit
    # (a real U-Net's BatchNorm drew a false TD218 so); they did change.
    torch.manual_seed(0)
    model = mlp(batchnorm=True)
    weight = model[1].weight
    before = weight.detach().clone()
    with torchdoctor.watch() as w:
        train(model, Nudge(model.parameters()), steps=3)
    assert not torch.equal(weight.detach(), before)
    assert float(weight.detach().float().norm()) == float(before.float().norm())
    assert not w.report.by_code("TD218")
