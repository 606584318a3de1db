"""The exception explainer: known PyTorch errors become specific, located findings."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.needs_torch
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from torchdoctor.findings import Severity  # noqa: E402
from torchdoctor.runtime.exceptions import explain_exception  # noqa: E402
from torchdoctor.runtime.exceptions.facts import DEVICE_MISMATCH_CODE as DEVICE_CODE  # noqa: E402

HERE = str(Path(__file__).resolve())


def line_of(marker: str) -> int:
    """The line of this file that ends with ``# <marker>``."""
    lines = Path(HERE).read_text(encoding="utf-8").splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


class Net(nn.Module):
    def __init__(self, head_in: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True))
        self.head = nn.Linear(head_in, 2)

    def forward(self, x: Any) -> Any:
        hidden = self.encoder(x)  # encoder-call
        return self.head(hidden)  # head-call


def explain(action: Callable[[], Any], models: tuple[Any, ...] = ()) -> Any:
    try:
        action()
    except BaseException as error:  # noqa: BLE001 - the explainer decides what counts
        return explain_exception(error, models=models, roots=[str(Path(HERE).parent)], step=3)
    raise AssertionError("the action did not raise")


# -- real errors raised by torch ----------------------------------------------------------


def test_linear_mismatch_names_module_path_user_line_and_sizes() -> None:
    model = Net(head_in=32)
    found = explain(lambda: model(torch.randn(4, 8)), models=(model,))
    assert found.code == "TD108"
    assert found.location.object == "head"
    assert (found.location.path, found.location.line) == (HERE, line_of("head-call"))
    assert "`head` (Linear) expects 32 input features but received 16" in found.message
    assert "nn.Linear(16, 2)" in found.fix_hint
    assert found.evidence["step"] == 3


def test_conv_channel_mismatch_spots_channels_last_batches() -> None:
    conv = nn.Conv2d(3, 4, 3)
    found = explain(lambda: conv(torch.randn(2, 8, 8, 3)))
    assert found.code == "TD108"
    assert "expects 3 input channels but received 8" in found.message
    assert "x.permute(0, 3, 1, 2)" in found.fix_hint


@pytest.mark.slow  # the first use of the meta device loads torch's decompositions
def test_model_left_on_meta_device_is_a_device_mismatch() -> None:
    with torch.device("meta"):
        model = Net()
    found = explain(lambda: model(torch.randn(4, 8)), models=(model,))
    assert found.code == DEVICE_CODE and found.evidence["known_error"] == "device-mismatch"
    assert found.location.line == line_of("encoder-call")
    assert found.location.object == "encoder.0"
    assert "meta" in found.message and "assign=True" in found.fix_hint


def test_float64_batch_is_a_dtype_mismatch() -> None:
    model = Net()
    found = explain(lambda: model(torch.randn(4, 8, dtype=torch.float64)), models=(model,))
    assert found.code == "TD107"
    assert "float64 and float32" in found.message
    assert "x.float()" in found.fix_hint


def test_labels_one_to_c_are_a_class_index_out_of_range() -> None:
    criterion = nn.CrossEntropyLoss()
    logits, labels = torch.randn(4, 5), torch.tensor([1, 2, 5, 3])
    found = explain(lambda: criterion(logits, labels), models=(criterion,))  # loss-call
    assert found.code == "TD403"
    assert found.location.line == line_of("loss-call")
    assert found.location.object == "criterion"
    assert "5 classes (0..4)" in found.message and "span 1..5" in found.message
    assert "subtract 1" in found.fix_hint


def test_negative_padding_labels_suggest_ignore_index() -> None:
    found = explain(lambda: F.cross_entropy(torch.randn(3, 4), torch.tensor([0, -1, 2])))
    assert found.code == "TD403"
    assert "ignore_index=-1" in found.fix_hint


def test_integer_labels_for_bce_are_a_target_dtype_error() -> None:
    logits, labels = torch.randn(4), torch.tensor([0, 1, 1, 0])
    found = explain(lambda: F.binary_cross_entropy_with_logits(logits, labels))
    assert found.code == "TD104"
    assert "int64" in found.message and "target.float()" in found.fix_hint


def test_float_class_labels_are_a_target_dtype_error() -> None:
    found = explain(lambda: F.cross_entropy(torch.randn(3, 4), torch.tensor([0.0, 1.0, 2.0])))
    assert found.code == "TD104"
    assert "float32" in found.message and "target.long()" in found.fix_hint


def test_second_backward_is_a_freed_graph_at_that_line() -> None:
    weight = torch.randn(3, requires_grad=True)

    def twice() -> None:
        loss = (weight * weight).sum()
        loss.backward()
        loss.backward()  # second-backward

    found = explain(twice)
    assert found.code == "TD219"
    assert found.location.line == line_of("second-backward")
    assert "detach()" in found.fix_hint


def test_inplace_relu_is_named_as_the_suspect() -> None:
    model = Net()

    def step() -> None:
        out = model.encoder(torch.randn(4, 8, requires_grad=True))
        out.mul_(2)
        out.sum().backward()

    found = explain(step, models=(model,))
    assert found.code == "TD220"
    assert found.evidence["inplace_modules"] == ["encoder.1"]
    assert "`encoder.1`" in found.fix_hint


def test_backward_of_a_fully_frozen_model_says_so() -> None:
    model = Net().requires_grad_(False)
    found = explain(lambda: model(torch.randn(4, 8)).sum().backward(), models=(model,))
    assert found.code == "TD209"
    assert "every one of the model's 4 parameters has requires_grad=False" in found.message


def test_absurd_cpu_allocation_is_out_of_memory_from_a_wrong_shape() -> None:
    found = explain(lambda: torch.empty(2**45))  # 128 TiB of float32
    assert found.code == "TD709" and found.severity is Severity.ERROR
    assert found.evidence["requested_bytes"] == 2**47
    assert "a tensor shape is wrong" in found.message


def test_a_new_error_while_handling_a_torch_error_is_not_that_error() -> None:
    model = Net(head_in=32)

    def handler_fails() -> None:
        try:
            model(torch.randn(4, 8))
        except RuntimeError:
            print(undefined_name)  # type: ignore[name-defined]  # noqa: F821

    found = explain(handler_fails, models=(model,))
    assert found.code == "TD004" and "NameError" in found.message


def test_chained_torch_error_is_still_recognised() -> None:
    model = Net(head_in=32)

    def wrapped() -> None:
        try:
            model(torch.randn(4, 8))
        except RuntimeError as error:
            raise ValueError("training failed") from error

    assert explain(wrapped, models=(model,)).code == "TD108"


# -- messages as other torch versions and devices word them ---------------------------------


def _raise(text: str, kind: type[BaseException] = RuntimeError) -> Callable[[], None]:
    def action() -> None:
        raise kind(text)  # synthetic-raise

    return action


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (
            "Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
            "and cpu! (when checking argument for argument mat1 in method wrapper_CUDA_addmm)",
            DEVICE_CODE,
        ),
        (
            "Expected all tensors to be on the same device, but got mat2 is on cpu, different from "
            "other tensors on cuda:0 (when checking argument in method wrapper_CUDA_mm)",
            DEVICE_CODE,
        ),
        (
            "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the "
            "same or input should be a MKLDNN tensor and weight is a dense tensor",
            DEVICE_CODE,
        ),
        (
            "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be "
            "the same",
            "TD107",
        ),
        ("expected scalar type Float but found Double", "TD107"),
        (
            "size mismatch, m1: [4 x 8], m2: [16 x 2] at "
            "/pytorch/aten/src/TH/generic/THTensorMath.cpp",
            "TD108",
        ),
        (
            "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; "
            "14.56 GiB already allocated; 3.44 MiB free; 14.77 GiB reserved in total by PyTorch)",
            "TD709",
        ),
        ("DataLoader worker (pid(s) 123, 456) exited unexpectedly", "TD413"),
        ("Assertion `cur_target >= 0 && cur_target < n_classes' failed.", "TD403"),
        (
            "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
            "reported",
            "TD004",
        ),
    ],
)
def test_wordings_of_other_versions_and_devices(text: str, code: str) -> None:
    found = explain(_raise(text))
    assert found.code == code
    assert found.evidence.get("known_error"), "a known error must say which one"
    assert found.location.line == line_of("synthetic-raise")


def test_cuda_oom_with_fragmentation_suggests_expandable_segments() -> None:
    text = (
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "80.00 GiB of which 1.20 GiB is free. Of the allocated memory 70.00 GiB is "
        "allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but unallocated."
    )
    oom = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError  # < 2.5
    found = explain(_raise(text, oom))
    assert found.code == "TD709"
    assert "2.0 GiB with 1.2 GiB free of 80.0 GiB" in found.message
    assert "expandable_segments:True" in found.fix_hint


@pytest.mark.parametrize(
    ("signal", "advice"), [("Killed", "host memory"), ("Bus error", "shared memory")]
)
def test_worker_killed_by_signal_gets_signal_specific_advice(signal: str, advice: str) -> None:
    found = explain(_raise(f"DataLoader worker (pid 4242) is killed by signal: {signal}. "))
    assert found.code == "TD413"
    assert advice in found.fix_hint
    assert found.evidence["signal"] == signal


def test_worker_death_is_placed_at_the_loop_over_the_loader() -> None:
    loader = torch.utils.data.DataLoader(list(range(8)), batch_size=4)

    def loop() -> None:
        for batch in loader:  # loader-loop
            total = batch.sum()
            if total >= 0:  # the signal lands wherever the main process happens to be
                raise RuntimeError("DataLoader worker (pid 77) is killed by signal: Killed. ")

    found = explain(loop)
    assert found.code == "TD413"
    assert found.location.line == line_of("loader-loop")
    assert found.location.object is None  # the running module is chance, not cause


def test_dataset_error_in_a_worker_points_at_the_dataset_line() -> None:
    text = (
        "Caught KeyError in DataLoader worker process 0.\nOriginal Traceback (most recent "
        f'call last):\n  File "{sys.modules["torch"].__file__}", line 10, in _worker_loop\n'
        f'    data = fetcher.fetch(index)\n  File "{HERE}", line 7, in __getitem__\n'
        "    return self.rows[index]['label']\nKeyError: 'label'\n"
    )
    found = explain(_raise(text, KeyError))
    assert found.code == "TD004"
    assert (found.location.path, found.location.line) == (HERE, 7)
    assert "KeyError: 'label'" in found.message


# -- staying quiet, or generic, where nothing is known -------------------------------------


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_interruptions_and_exits_are_not_findings(kind: type[BaseException]) -> None:
    assert explain(_raise("", kind)) is None


@pytest.mark.parametrize(
    "text",
    [
        "config key 'device' must be one of cpu, cuda",
        "expected dtype to be given in the YAML file",
        "cache is out of memory budget; raise cache_mb",
        "my worker pool died: restart it",
        "Target column 'label' missing from the CSV",
        "index out of range in self",  # not inside an embedding: no claim about tables
        "shape of the image is invalid",
        "GPU not found",
        "",
        "backward pass disabled by config",
        "list index out of range",
        "tuple index out of range",
        "not enough values to unpack (expected 3, got 2)",
        "Target 'train' is out of date; rebuild it",
        "element 0 of the list is None",
        "running_mean missing from the statistics file",
        "CUDA driver is out of date",
        "worker process killed by the user",
        "No module named 'torchvision'",
        "mat1 not found in the cache",
    ],
)
def test_lookalike_messages_are_generic_not_misdiagnosed(text: str) -> None:
    """Messages of other libraries and of user code that share words with torch's."""
    found = explain(_raise(text, ValueError))
    if text == "index out of range in self":
        assert found.code == "TD004" and "embedding" not in found.message.lower()
        return
    assert found.code == "TD004"
    assert "known_error" not in found.evidence
    assert found.location.line == line_of("synthetic-raise")


def test_an_unreadable_message_still_gives_the_known_meaning(monkeypatch) -> None:
    from torchdoctor.runtime.exceptions import catalogue

    def broken(facts: object) -> None:
        raise ValueError("a wording the detail function did not expect")

    [entry] = [e for e in catalogue.KNOWN_ERRORS if e.key == "view-size"]
    index = catalogue.KNOWN_ERRORS.index(entry)
    patched = catalogue.KnownError(
        entry.key, entry.code, entry.pattern, entry.meaning, ("Use `x.flatten(1)`.",), broken
    )
    monkeypatch.setattr(
        catalogue,
        "KNOWN_ERRORS",
        (*catalogue.KNOWN_ERRORS[:index], patched, *catalogue.KNOWN_ERRORS[index + 1 :]),
    )
    found = explain(lambda: torch.randn(4, 8).view(3, -1))
    assert found.code == "TD108"
    assert found.message.startswith("A view or reshape asked for a shape")
    assert found.fix_hint == "Use `x.flatten(1)`."


def test_an_error_the_script_handles_itself_is_not_a_finding() -> None:
    import torchdoctor

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torchdoctor.watch() as session:
        with contextlib.suppress(RuntimeError):
            model(torch.randn(4, 3))  # a probe the script expects to fail
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    assert not {"TD004", "TD108"} & session.report.codes()


def test_the_error_that_ends_a_watched_run_is_reported_once() -> None:
    import torchdoctor

    model = Net(head_in=32)
    with pytest.raises(RuntimeError), torchdoctor.watch() as session:
        model(torch.randn(4, 8))
    [found] = session.report.by_code("TD108")
    assert found.location.object == "head"


def test_a_syntax_error_in_an_imported_file_points_at_the_broken_line(tmp_path: Path) -> None:
    broken = tmp_path / "model_def.py"
    broken.write_text("import torch\n\ndef forward(x)\n    return x\n", encoding="utf-8")
    found = explain(lambda: compile(broken.read_text(), str(broken), "exec"))
    assert found.code == "TD004"
    assert (found.location.path, found.location.line) == (str(broken), 3)


def test_user_exception_class_named_like_torch_internals_is_generic() -> None:
    class Unsupported(RuntimeError):  # a user's own class, not torch._dynamo's
        pass

    found = explain(_raise("feature not supported", Unsupported))
    assert found.code == "TD004"


def test_broadcast_outside_a_loss_is_a_shape_error_not_a_loss_target_error() -> None:
    found = explain(lambda: torch.randn(4, 8) + torch.randn(4, 3))
    assert found.code == "TD108"


def test_broadcast_inside_a_loss_is_a_loss_target_error() -> None:
    with pytest.warns(UserWarning, match="target size"):
        found = explain(lambda: F.mse_loss(torch.randn(4, 10), torch.randn(4)))
    assert found.code == "TD306"
    assert "input [4, 10], target [4]" in found.message


def test_location_is_never_inside_torch() -> None:
    model = Net(head_in=32)
    found = explain(lambda: model(torch.randn(4, 8)))
    assert found.location.path == HERE


def test_without_known_models_the_outermost_module_is_taken_as_the_model() -> None:
    model = Net(head_in=32)
    found = explain(lambda: model(torch.randn(4, 8)), models=())
    assert found.location.object == "head"


def test_every_code_the_explainer_can_report_is_registered_at_run_depth() -> None:
    from torchdoctor.findings import Depth
    from torchdoctor.rules.detectors import load_detector_modules, registered_detectors
    from torchdoctor.runtime.exceptions import KNOWN_ERRORS

    load_detector_modules((Depth.RUN,))
    explainer = [d for d in registered_detectors(Depth.RUN) if d.name == "ExceptionExplainer"]
    assert explainer, "the exception explainer is not registered"
    codes = {entry.code for entry in KNOWN_ERRORS} | {"TD004", DEVICE_CODE, "TD306"}
    assert codes <= set(explainer[0].codes)
