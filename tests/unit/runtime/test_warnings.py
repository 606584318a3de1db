"""PyTorch warnings during a run: explained, located at the user's line, never hidden."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import torchdoctor  # noqa: E402
from torchdoctor.findings import Confidence, Severity  # noqa: E402
from torchdoctor.runtime.detectors.warnings import (  # noqa: E402
    Origin,
    accelerator_present,
    classify_warning,
)

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def train(
    steps: int = 3, *, target_shape: tuple[int, ...] = (16,), scheduler_first: bool = False
) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    for _ in range(steps):
        if scheduler_first:
            scheduler.step()  # scheduler-first
        x, y = torch.randn(16, 4), torch.randn(*target_shape)
        loss = F.mse_loss(model(x), y)  # loss-line
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if not scheduler_first:
            scheduler.step()


def watched(**kwargs: object) -> tuple[torchdoctor.Report, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        with torchdoctor.watch() as session:
            train(**kwargs)  # type: ignore[arg-type]
    return session.report, shown


# -- through the monitor --------------------------------------------------------------------


def test_loss_broadcast_warning_is_td306_at_the_loss_line_and_still_shown() -> None:
    report, shown = watched()
    [found] = report.by_code("TD306")
    assert (found.location.path, found.location.line) == (HERE, line_of("loss-line"))
    assert "broadcast to [16, 16]" in found.message and "`mse_loss`" in found.message
    assert "squeeze(-1)" in found.fix_hint
    assert any("target size" in str(w.message) for w in shown), "the user must still see it"


def test_scheduler_before_optimizer_is_td607_at_the_scheduler_line() -> None:
    report, _ = watched(target_shape=(16, 1), scheduler_first=True)
    [found] = report.by_code("TD607")
    assert found.location.line == line_of("scheduler-first")
    assert found.severity is Severity.WARNING


def test_correct_loop_draws_no_warning_finding() -> None:
    report, _ = watched(target_shape=(16, 1))
    assert not {"TD003", "TD306", "TD607"} & report.codes()


def test_a_warning_the_user_filters_out_is_not_reported() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using a target size")
        with torchdoctor.watch() as session:
            train()
    assert not session.report.by_code("TD306")


def test_users_own_warnings_are_not_reported() -> None:
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        warnings.warn("learning rate looks high", UserWarning, stacklevel=1)
    assert len(session.report) == 0


def test_repeated_warning_is_one_finding_with_a_count() -> None:
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        with torchdoctor.watch() as session:
            train(steps=4)
    [found] = session.report.by_code("TD306")
    assert found.evidence["times_shown"] == 4
    assert sum("target size" in str(w.message) for w in shown) == 4


def test_scheduler_warning_with_a_grad_scaler_in_scope_is_low_confidence_info() -> None:
    if not hasattr(torch.amp, "GradScaler"):  # torch < 2.3 has only torch.cuda.amp's
        pytest.skip("needs torch.amp.GradScaler")
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    scaler = torch.amp.GradScaler("cpu")
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        optimizer.step()  # a skipped scaler.step() never reaches the wrapped step
        scheduler._step_count = 1
        optimizer._opt_called = False  # as after a step GradScaler skipped
        scheduler.step()
    assert scaler.is_enabled()
    [found] = session.report.by_code("TD607")
    assert found.severity is Severity.INFO and found.confidence is Confidence.LOW
    assert "GradScaler" in found.message


# -- classification -------------------------------------------------------------------------


def test_torch_warning_without_an_entry_is_td003_info() -> None:
    found = classify_warning("something odd happened", UserWarning, Origin.TORCH, "fn")
    assert found is not None and (found.code, found.severity) == ("TD003", Severity.INFO)


@pytest.mark.parametrize(
    "text",
    [
        "Sparse invariant checks are implicitly disabled. Memory errors (e.g. SEGFAULT) will "
        "occur when operating on a sparse tensor which violates the invariants.",
        "The PyTorch API of nested tensors is in prototype stage and will change in the near "
        "future.",
        "enable_nested_tensor is True, but self.use_nested_tensor is False because "
        "encoder_layer.self_attn.batch_first was not True",
    ],
)
def test_torch_information_notices_are_dropped(text: str) -> None:
    assert classify_warning(text, UserWarning, Origin.TORCH, "fn") is None


def test_dropout2d_on_a_flat_input_is_a_warning_that_says_whole_rows_are_zeroed() -> None:
    found = classify_warning(
        "dropout2d: Received a 2-D input to dropout2d, which is "
        "deprecated and will result in an error in a future release.",
        UserWarning,
        Origin.TORCH,
        "dropout2d",
    )
    assert found is not None and found.severity is Severity.WARNING
    assert "whole rows" in found.meaning and "nn.Dropout" in found.fix


def _scaler_run(autocast_dtype: Any) -> torchdoctor.Report:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        warnings.simplefilter("always")
        scaler = torch.amp.GradScaler("cuda")  # no CUDA here: torch switches it off
        for _ in range(3):
            context = (
                torch.autocast("cpu", dtype=autocast_dtype)
                if autocast_dtype
                else contextlib.nullcontext()
            )
            with context:
                loss = model(torch.randn(8, 4)).float().pow(2).mean()
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    return session.report


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_grad_scaler_switched_off_is_quiet_when_no_float16_autocast_ran() -> None:
    assert not _scaler_run(None).by_code("TD003")
    assert not _scaler_run(torch.bfloat16).by_code("TD003")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_grad_scaler_switched_off_is_a_warning_when_float16_autocast_ran() -> None:
    [found] = _scaler_run(torch.float16).by_code("TD003")
    assert found.severity is Severity.WARNING and "float16" in found.message
    assert found.evidence["known_warning"] == "grad-scaler-disabled"


def test_a_warning_of_the_script_is_shown_once_however_long_the_watch() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout2d(0.2), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        with torchdoctor.watch() as session:
            for _ in range(6):  # past the end of model discovery, which removes a hook
                loss = model(torch.randn(8, 4)).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    assert sum("dropout2d" in str(w.message) for w in shown) == 1
    [found] = session.report.by_code("TD003")
    assert found.evidence["warning"].endswith("future release.")


def test_torch_deprecation_is_td003_info() -> None:
    found = classify_warning("`foo` is deprecated", FutureWarning, Origin.TORCH)
    assert found is not None and found.severity is Severity.INFO
    assert "deprecated" in found.meaning


def test_third_party_warning_is_info_at_most() -> None:
    found = classify_warning("PIL is slow", UserWarning, Origin.THIRD_PARTY)
    assert found is not None and found.severity is Severity.INFO and found.source == "A library"


def test_cpp_warning_raised_on_a_user_line_is_torchs() -> None:
    found = classify_warning(
        "unknown C++ warning", UserWarning, Origin.USER, "main", "y = torch.frobnicate(x)"
    )
    assert found is not None and found.code == "TD003"
    assert found.confidence is Confidence.MEDIUM


@pytest.mark.parametrize(
    ("category", "line"),
    [
        (UserWarning, 'warnings.warn("lr looks high")'),  # the user's own warning
        (RuntimeWarning, "ratio = a / b"),  # NumPy's C code, not torch
    ],
)
def test_warnings_of_the_users_own_code_are_not_reported(
    category: type[Warning], line: str
) -> None:
    assert classify_warning("message", category, Origin.USER, "main", line) is None


@pytest.mark.parametrize(
    "text",
    [
        "Using `torch.compile(module)` when there are global hooks on modules (e.g., from "
        "`register_module_forward_hook`); this will cause the hooks to fire an extra time",
        "anything at all",
    ],
)
def test_warnings_torchdoctor_causes_are_not_reported(text: str) -> None:
    origin = Origin.TORCH if text.startswith("Using") else Origin.TORCHDOCTOR
    assert classify_warning(text, UserWarning, origin) is None


def test_known_torch_warning_gets_its_explanation() -> None:
    found = classify_warning(
        "reduction: 'mean' divides the total loss by both the batch size and the support size.",
        UserWarning,
        Origin.TORCH,
        "kl_div",
    )
    assert found is not None and "batchmean" in found.fix


def test_warnings_before_the_watch_began_are_not_reported() -> None:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        train(steps=1)
        with torchdoctor.watch() as session:
            pass
    assert len(session.report) == 0


def test_correct_scheduler_order_with_a_grad_scaler_is_quiet() -> None:
    if not hasattr(torch.amp, "GradScaler"):  # torch < 2.3 has only torch.cuda.amp's
        pytest.skip("needs torch.amp.GradScaler")
    scaler = torch.amp.GradScaler("cpu")
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        train(target_shape=(16, 1))
    assert scaler.is_enabled() and not session.report.by_code("TD607")


def test_known_torch_text_issued_by_torchdoctor_is_not_reported() -> None:
    text = "Detected call of `lr_scheduler.step()` before `optimizer.step()`."
    assert classify_warning(text, UserWarning, Origin.TORCHDOCTOR) is None


def test_one_warning_shown_from_two_lines_is_one_finding_at_the_first() -> None:
    source = torch.ones(3)
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        warnings.simplefilter("always")
        torch.tensor(source)  # first-copy
        torch.tensor(source)  # second-copy
    [found] = session.report.by_code("TD003")
    assert found.location.line == line_of("first-copy")
    assert found.evidence["times_shown"] == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_deprecated_torch_class_is_info_from_pytorch_and_its_cuda_notice_is_dropped() -> None:
    if not hasattr(torch.cuda.amp, "GradScaler"):
        pytest.skip("torch without torch.cuda.amp.GradScaler")
    with warnings.catch_warnings(record=True), torchdoctor.watch() as session:
        warnings.simplefilter("always")
        torch.cuda.amp.GradScaler(enabled=True)
    found = session.report.by_code("TD003")
    assert [f.evidence["category"] for f in found] == ["FutureWarning"]
    assert found[0].severity is Severity.INFO and "PyTorch warned" in found[0].message


def _pinned_loader_run() -> tuple[torchdoctor.Report, list[warnings.WarningMessage]]:
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randint(0, 2, (32,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8, pin_memory=True)
    with warnings.catch_warnings(record=True) as shown, torchdoctor.watch() as session:
        warnings.simplefilter("always")
        for _ in range(2):
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    return session.report, shown


@pytest.mark.skipif(accelerator_present(), reason="needs a machine without an accelerator")
def test_pin_memory_on_a_machine_without_accelerator_is_quiet_and_still_shown() -> None:
    report, shown = _pinned_loader_run()
    assert any("pin_memory" in str(w.message) for w in shown)  # the user still sees it
    assert not report.by_code("TD003")


def test_pin_memory_ignored_on_a_machine_with_an_accelerator_is_info(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Torch before 2.6 checked CUDA only: an XPU or MPS machine got the same words while
    # its loader really pinned nothing. Availability is patched; torch still warns here.
    if accelerator_present():
        pytest.skip("torch pins here and says nothing")
    from torchdoctor.runtime.detectors import warnings as detector

    monkeypatch.setattr(detector, "accelerator_present", lambda: True)
    [found] = _pinned_loader_run()[0].by_code("TD003")
    assert found.severity is Severity.INFO
    assert found.evidence["known_warning"] == "pin-memory-unused"
    assert "pageable" in found.message


def test_pin_memory_on_mps_is_a_notice() -> None:
    text = "'pin_memory' argument is set as true but not supported on MPS now, device pinned "
    assert classify_warning(text + "memory won't be used.", UserWarning, Origin.TORCH) is None
