"""The known PyTorch warnings: message pattern -> rule, meaning, fix.

A warning that matches an entry is explained with the entry's sentence and mapped to the
entry's rule (TD306 for a loss that broadcasts its target, TD607 for a scheduler stepped
before its optimizer, TD003 otherwise). Patterns follow the wording of torch 2.2 to 2.13.

A warning becomes a finding only when it signals a problem for the run that showed it:
information notices (``dropped``) never do, and an entry with a ``condition`` does only
when the run shows that condition (a GradScaler switched off matters only if float16
autocast actually ran; unpinned batches matter only on a machine with an accelerator).
Conditions are named here and measured by the warnings detector.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchdoctor.findings import Severity

__all__ = [
    "ACCELERATOR_PRESENT",
    "CAUSED_BY_TORCHDOCTOR",
    "FP16_AUTOCAST",
    "KNOWN_WARNINGS",
    "KnownWarning",
    "TD003",
]

TD003 = "TD003"
# Condition: float16 autocast was active during a forward pass of the run.
FP16_AUTOCAST = "fp16-autocast-ran"
# Condition: the machine has an accelerator (CUDA, XPU, MPS, ...) that torch can use.
ACCELERATOR_PRESENT = "accelerator-present"

# Warnings that the monitor's own hooks provoke: reporting them would blame the user.
CAUSED_BY_TORCHDOCTOR: tuple[re.Pattern[str], ...] = (
    re.compile(r"Using `torch\.compile\(module\)` when there are global hooks on modules"),
)


@dataclass(frozen=True, slots=True)
class KnownWarning:
    """A recognisable PyTorch warning: what it means and what to do.

    ``meaning`` and ``fix`` may name the pattern's groups (``{target}``) and ``{function}``,
    the torch function that warned. ``dropped``: an information notice that is never a
    finding. ``condition``: the finding stands only if the run shows it (``FP16_AUTOCAST``).
    """

    key: str
    code: str
    pattern: re.Pattern[str]
    meaning: str
    fix: str
    severity: Severity | None = None
    condition: str | None = None
    dropped: bool = False


def _w(
    key: str,
    code: str,
    pattern: str,
    meaning: str,
    fix: str,
    severity: Severity | None = None,
    condition: str | None = None,
) -> KnownWarning:
    return KnownWarning(key, code, re.compile(pattern), meaning, fix, severity, condition)


def _notice(key: str, pattern: str) -> KnownWarning:
    """A PyTorch information notice: shown to the user, never a finding."""
    return KnownWarning(key, TD003, re.compile(pattern), "", "", dropped=True)


_INFO, _WARN = Severity.INFO, Severity.WARNING

# fmt: off
KNOWN_WARNINGS: tuple[KnownWarning, ...] = (
    _w("loss-target-broadcast", "TD306",
       r"Using a target size \((?P<target>torch\.Size\(\[[\d, ]*\]\))\) that is different to "
       r"the input size \((?P<input>torch\.Size\(\[[\d, ]*\]\))\)",
       "`{function}` received output {input} and target {target}, which broadcast to "
       "{broadcast}: every output is compared with every target, so the loss is wrong and "
       "the model learns to predict the mean",
       "Give output and target the same shape before the loss: `output.squeeze(-1)` for a "
       "[N, 1] output, or `target.unsqueeze(-1)`."),
    _w("scheduler-before-optimizer", "TD607",
       r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`",
       "`lr_scheduler.step()` ran before the first `optimizer.step()`, so the first value of "
       "the learning-rate schedule is skipped and every later epoch uses the next one",
       "Call `scheduler.step()` after `optimizer.step()` (once per epoch or per batch, as "
       "the scheduler expects)."),
    _w("scheduler-step-overridden", TD003,
       r"Seems like `optimizer\.step\(\)` has been overridden after learning rate scheduler",
       "`optimizer.step` was replaced after the scheduler was built, so the scheduler cannot "
       "check the call order any more",
       "Build the scheduler after wrapping or patching the optimizer."),
    _w("copy-construct-tensor", TD003,
       r"To copy construct from a tensor, it is recommended to use sourceTensor\.",
       "`torch.tensor(t)` on an existing tensor copies it and cuts it out of the autograd "
       "graph: no gradient flows back through the copy",
       "Use the tensor itself, `torch.stack(list_of_tensors)`, or `t.clone().detach()` when a "
       "detached copy is really meant."),
    _w("non-leaf-grad", TD003,
       r"The \.grad attribute of a Tensor that is not a leaf Tensor is being accessed",
       "`.grad` was read on a non-leaf tensor (an activation, or a parameter after `.to()`): "
       "it is always None there",
       "Read `.grad` on the leaf (the parameter itself, moved before wrapping it in "
       "`nn.Parameter`), or call `t.retain_grad()` before `backward()`."),
    _w("implicit-softmax-dim", TD003,
       r"Implicit dimension choice for (?P<op>\w+) has been deprecated",
       "`{op}` was called without `dim`, so torch guessed the dimension; for some input "
       "ranks it normalises over the batch instead of the classes",
       "Pass the dimension explicitly: `{op}(x, dim=-1)`."),
    _w("kl-div-mean", TD003,
       r"reduction: 'mean' divides the total loss by both the batch size and the support size",
       "`kl_div` with `reduction='mean'` divides by the number of classes as well as the "
       "batch, so the loss (and its gradient) is that many times too small",
       "Use `reduction='batchmean'`, which matches the KL divergence's definition."),
    _w("partial-backward-hook", TD003,
       r"Using a non-full backward hook when the forward contains multiple autograd Nodes",
       "a module backward hook registered with `register_backward_hook` sees the gradients "
       "of one internal operation only, not of the module's inputs",
       "Use `register_full_backward_hook`."),
    _w("too-many-workers", TD003,
       r"This DataLoader will create (?P<n>\d+) worker processes in total\. Our suggested max "
       r"number of worker in current system is (?P<max>\d+)",
       "the DataLoader starts {n} workers on a machine that can run about {max}: they fight "
       "for the CPU and can make loading slower or freeze the machine",
       "Set `num_workers` to at most {max}."),
    _w("autocast-disabled", TD003,
       r"User provided device_type of '(?P<device>\w+)', but CUDA is not available\. Disabling",
       "`torch.autocast(device_type='{device}')` was switched off because there is no such "
       "device: the run trains in full precision, not the mixed precision it asks for",
       "Take `device_type` from the device you actually train on (`x.device.type`).", _INFO),
    _w("grad-scaler-disabled", TD003,
       r"GradScaler is enabled, but CUDA is not available\.\s+Disabling",
       "GradScaler was switched off because CUDA is not available, yet float16 autocast ran: "
       "the float16 loss is not scaled, so small gradients underflow to zero",
       "Build it for the device you train on (`torch.amp.GradScaler(device)`), or autocast "
       "to bfloat16, which needs no scaler.", _WARN, FP16_AUTOCAST),
    _w("dropout2d-flat-input", TD003,
       r"dropout2d: Received a 2-D input to dropout2d",
       "`Dropout2d` received a 2-D input, which it reads as one unbatched [channels, length] "
       "sample: it zeroes whole rows (every feature of a sample at once), not single "
       "features",
       "Use `nn.Dropout` on [batch, features] inputs; `Dropout2d` is for [N, C, H, W] "
       "feature maps.", _WARN),
    # Torch says this when it finds no accelerator: on a CPU-only machine there is nothing
    # to pin for, and the code, written for a GPU, is right. Older torch checked CUDA only,
    # so on an XPU or MPS machine the same words mean the loader really pins nothing.
    _w("pin-memory-unused", TD003,
       r"'pin_memory' argument is set as true but no accelerator is found",
       "the DataLoader's `pin_memory=True` was ignored, yet this machine has an "
       "accelerator: batches are copied to it from pageable memory",
       "Make sure this torch build supports the accelerator you train on, or drop "
       "`pin_memory=True`.", _INFO, ACCELERATOR_PRESENT),
    _notice("pin-memory-mps", r"'pin_memory' argument is set as true but not supported on MPS"),
    _notice("sparse-invariants-notice", r"Sparse invariant checks are implicitly disabled"),
    _notice("nested-tensor-prototype",
            r"The PyTorch API of nested tensors is in prototype stage"),
    _notice("nested-tensor-unused",
            r"enable_nested_tensor is True, but self\.use_nested_tensor is False"),
    _notice("tf32-notice", r"TensorFloat32 tensor cores for float32 matrix multiplication "
            r"available but not enabled"),
    _w("meta-load-no-op", TD003,
       r"copying from a non-meta parameter in the checkpoint to a meta parameter in the "
       r"current model, which is a no-op",
       "`load_state_dict` into a model on the `meta` device loaded nothing: its parameters "
       "still have no data",
       "Pass `assign=True` to `load_state_dict`, or call `model.to_empty(device=...)` before "
       "loading."),
    _w("checkpoint-no-grad-inputs", TD003,
       r"None of the inputs have requires_grad=True\. Gradients will be None",
       "a reentrant `torch.utils.checkpoint` segment got no input that requires grad, so the "
       "parameters inside it receive no gradient and never train",
       "Pass `use_reentrant=False` to `torch.utils.checkpoint.checkpoint`."),
    _w("rnn-weights-not-contiguous", TD003,
       r"RNN module weights are not part of single contiguous chunk of memory",
       "the RNN's weights are scattered in memory, so every call copies them first",
       "Call `rnn.flatten_parameters()` after moving or wrapping the model.", _INFO),
    _w("anomaly-mode-on", TD003, r"Anomaly Detection has been enabled",
       "autograd anomaly detection is on: every step runs several times slower",
       "Turn `torch.autograd.set_detect_anomaly` off once the bug it hunts is found.", _INFO),
    _w("load-weights-only-false", TD003,
       r"You are using `torch\.load` with `weights_only=False`",
       "`torch.load` unpickles the file, which can run arbitrary code (rule TD902)",
       "Pass `weights_only=True` for checkpoints of tensors and plain containers."),
    _w("numpy-not-writable", TD003, r"The given NumPy array is not writable",
       "a tensor was made from a read-only NumPy array without a copy; writing to it is "
       "undefined behaviour",
       "Copy the array first (`np.array(a)`), or use `torch.tensor(a)`, which copies.", _INFO),
    _w("slow-list-of-arrays", TD003,
       r"Creating a tensor from a list of numpy\.ndarrays is extremely slow",
       "a tensor was built from a Python list of NumPy arrays, element by element",
       "Stack the list into one array first: `torch.from_numpy(np.stack(arrays))`.", _INFO),
    _w("output-resized", TD003, r"An output with one or more elements was resized",
       "an `out=` tensor had the wrong shape and was resized, a deprecated behaviour",
       "Allocate `out=` tensors with the result's shape, or drop `out=`.", _INFO),
)
# fmt: on
