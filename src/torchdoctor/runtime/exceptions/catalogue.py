"""The known PyTorch errors: message pattern -> rule, meaning, likely fixes.

Patterns are searched in the whole exception text (which, for errors re-raised from a
DataLoader worker or wrapped by ``torch.compile``, holds the original message too) and
cover the wordings of torch 2.2 to 2.13. The first entry that matches wins, so specific
entries come before general ones. An entry's detail function, when it has one, reads the
numbers and says them in the user's terms; it may return ``None`` to fall back to the
entry's own meaning and fixes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchdoctor.runtime.exceptions import autograd, data, devices, memory, shapes
from torchdoctor.runtime.exceptions.ddp import unused_parameters
from torchdoctor.runtime.exceptions.facts import DEVICE_MISMATCH_CODE, DetailFunction

__all__ = ["KNOWN_ERRORS", "KnownError", "match_known_error"]


@dataclass(frozen=True, slots=True)
class KnownError:
    """One recognisable PyTorch error.

    Attributes:
        key: a stable name for the error, reported as evidence.
        code: the catalogued rule it is an instance of.
        pattern: searched in the exception's text.
        meaning: what it means, when no detail function says it better.
        fixes: the likely fixes, imperative.
        detail: reads the message's numbers into a specific explanation.
        types: exception class names it must be one of (empty: any).
    """

    key: str
    code: str
    pattern: re.Pattern[str]
    meaning: str
    fixes: tuple[str, ...] = ()
    detail: DetailFunction | None = None
    types: tuple[str, ...] = ()


def _k(
    key: str,
    code: str,
    pattern: str,
    meaning: str,
    *fixes: str,
    detail: DetailFunction | None = None,
    types: tuple[str, ...] = (),
) -> KnownError:
    return KnownError(key, code, re.compile(pattern, re.DOTALL), meaning, fixes, detail, types)


_DIMS = r"[\d, ]*"
_DEVICE = r"[\w:]+"

# fmt: off
KNOWN_ERRORS: tuple[KnownError, ...] = (
    # -- memory (first: an OOM message may mention shapes or devices) --------------------
    _k("out-of-memory", "TD709",
       r"(?:CUDA|HIP|MPS|XPU|backend) out of memory|DefaultCPUAllocator: "
       r"(?:not enough memory|can't allocate memory)|CUBLAS_STATUS_ALLOC_FAILED",
       "the run ran out of memory", detail=memory.out_of_memory),
    _k("out-of-memory-type", "TD709", r".*", "the run ran out of memory",
       detail=memory.out_of_memory,
       types=("torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "builtins.MemoryError")),
    # -- DataLoader workers ----------------------------------------------------------------
    _k("worker-killed", "TD413",
       r"DataLoader worker \(pid\(?s?\)? ?(?P<pids>[\d, ]+)\) (?:is killed by signal: "
       r"(?P<signal>[^.\n]+)|exited unexpectedly)",
       "a DataLoader worker process died", detail=data.worker_died),
    _k("collate-sizes", "TD004",
       r"stack expects each tensor to be equal size, but got \[(?P<first>[\d, ]*)\] at "
       r"entry \d+ and \[(?P<second>[\d, ]*)\]",
       "the DataLoader could not batch samples of different shapes",
       detail=data.collate_sizes),
    _k("loader-timeout", "TD004", r"DataLoader timed out after (?P<seconds>\d+) seconds",
       "a DataLoader worker produced no batch within the timeout",
       "Run with `num_workers=0` to see where the Dataset hangs (a lock, a network read, a "
       "deadlock after fork); raise `timeout` only if single batches are slow on purpose."),
    _k("shared-memory", "TD004",
       r"unable to open shared memory object|received 0 items of ancdata|Too many open files",
       "the DataLoader workers could not pass tensors through shared memory",
       "Call `torch.multiprocessing.set_sharing_strategy('file_system')` at start-up, or raise "
       "the open-file limit (`ulimit -n`) and the size of /dev/shm."),
    # -- device and dtype --------------------------------------------------------------------
    _k("device-mismatch", DEVICE_MISMATCH_CODE,
       rf"Expected all tensors to be on the same device, but (?:found at least two devices, "
       rf"(?P<first>{_DEVICE}) and (?P<second>{_DEVICE})|got \w+ is on (?P<first2>{_DEVICE}), "
       rf"different from other tensors on (?P<second2>{_DEVICE}))|Tensor on device "
       rf"(?P<first3>{_DEVICE}) is not on the expected device (?P<second3>{_DEVICE})|"
       r"Expected object of device type \w+ but got device type|is on CPU, but expected it to "
       r"be on GPU|indices should be either on cpu or on the same device",
       "tensors on different devices met in one operation", detail=devices.device_mismatch),
    _k("meta-data", DEVICE_MISMATCH_CODE,
       r"Cannot copy out of meta tensor|cannot be called on meta tensors|Tensor\.item\(\) "
       r"cannot be called on meta|Cannot access data pointer of Tensor.*meta",
       "a tensor on the meta device was read", detail=devices.meta_data_access),
    _k("input-weight-type", "TD107",
       r"Input type \((?P<first>[\w.:]+)\) and (?:weight|bias) type \((?P<second>[\w.:]+)\) "
       r"should be the same",
       "a layer's input and weights differ in device or dtype",
       detail=devices.input_weight_type),
    _k("target-dtype", "TD104",
       r"expected target dtype to be Long or Byte, but got (?P<got>\w+)|"
       r"nll_loss\w*\" not implemented for '(?P<second>\w+)'",
       "a class-index loss received targets that are not integers", detail=devices.target_dtype),
    _k("dtype-mismatch", "TD107",
       r"(?:mat1 and mat2|self and mat2|m1 and m2|addmv input tensors) must have the same "
       r"dtype, but got:? (?P<first>\w+)(?: and | != )(?P<second>\w+)|expected (?:m1 and m2|"
       r"both vectors) to have (?:the )?same dtype, but got:? (?P<first2>\w+) != "
       r"(?P<second2>\w+)|expected scalar type (?P<second3>\w+) but found (?P<first3>\w+)|"
       r"Found dtype (?P<first4>\w+) but expected (?P<second4>\w+)|mixed dtype \(CPU\)|"
       r"result type \w+ can't be cast to the desired output type",
       "one operation received tensors of different dtypes", detail=devices.dtype_mismatch),
    _k("index-dtype", "TD107",
       r"Expected tensor for argument #\d+ 'indices' to have one of the following scalar types: "
       r"Long, Int; but got (?P<got>[\w.]+)",
       "an embedding lookup received float indices",
       "Convert token or category ids to integers where they are built (`ids.long()`); ids that "
       "went through a float tensor may also have lost precision."),
    _k("dtype-unsupported", "TD004", r"\"(?P<op>\w+)\" not implemented for '(?P<dtype>\w+)'",
       "this operation has no kernel for the tensor's dtype on this device",
       "Keep the model in float32 and use `torch.autocast` for reduced precision (float16 "
       "kernels are missing on CPU; use bfloat16 there)."),
    # -- shapes ------------------------------------------------------------------------------
    _k("linear-features", "TD108",
       r"mat1 and mat2 shapes cannot be multiplied \((?P<m>\d+)x(?P<k1>\d+) and "
       r"(?P<k2>\d+)x(?P<n>\d+)\)|size mismatch, m1: \[(?P<m2>\d+) x (?P<k12>\d+)\], "
       r"m2: \[(?P<k22>\d+) x (?P<n2>\d+)\]|a and b must have same reduction dim, but got "
       r"\[(?P<m3>\d+), (?P<k13>\d+)\] X \[(?P<k23>\d+), (?P<n3>\d+)\]",
       "a layer received the wrong number of input features", detail=shapes.linear_features),
    _k("conv-channels", "TD108",
       rf"Given groups=\d+, (?:weight|expected weight) of size \[{_DIMS}\], expected "
       rf"input\[(?P<input>{_DIMS})\] to have (?P<expected>\d+) channels, but got "
       r"(?P<got>\d+) channels",
       "a convolution received the wrong number of channels", detail=shapes.conv_channels),
    _k("conv-rank", "TD108",
       rf"Expected \d+D \(unbatched\) or (?P<batched>\d+)D \(batched\) input to "
       rf"(?P<op>\w+), but got input of size:? \[(?P<input>{_DIMS})\]",
       "a layer received a tensor with the wrong number of dimensions",
       detail=shapes.conv_rank),
    _k("norm-features", "TD108",
       r"running_mean should contain (?P<got>\d+) elements not (?P<expected>\d+)|"
       rf"Given normalized_shape=\[(?P<normalized>{_DIMS})\], expected input with shape "
       rf"\[\*,? ?{_DIMS}\], but got input of size ?\[(?P<input>{_DIMS})\]",
       "a normalisation layer received the wrong number of features",
       detail=shapes.norm_features),
    _k("one-value-per-channel", "TD108",
       r"Expected more than 1 value per channel when training, got input size "
       r"(?P<shape>torch\.Size\(\[[\d, ]*\]\))",
       "BatchNorm in training mode received a batch of one", detail=shapes.one_value_per_channel),
    _k("sequence-features", "TD108",
       r"input\.size\(-1\) must be equal to input_size\. Expected (?P<expected>\d+), got "
       r"(?P<got>\d+)|was expecting embedding dimension of (?P<expected2>\d+), but got "
       r"(?P<got2>\d+)",
       "a sequence layer received the wrong number of features",
       detail=shapes.sequence_features),
    _k("hidden-size", "TD108",
       rf"Expected hidden(?:\[\d\])? size \((?P<expected>{_DIMS})\), got \[(?P<got>{_DIMS})\]",
       "a recurrent layer received a hidden state of the wrong shape",
       detail=shapes.hidden_size),
    _k("input-too-small", "TD108",
       r"(?P<detail>Calculated padded input size per channel: .*?Kernel size can't be greater "
       r"than actual input size|Given input size: .*?Output size is too small)",
       "a convolution or pooling layer received a feature map smaller than its kernel",
       detail=shapes.input_too_small),
    _k("bce-target-shape", "TD306",
       rf"(?P<bce>Target size) \(torch\.Size\(\[(?P<target>{_DIMS})\]\)\) must be the same as "
       rf"input size \(torch\.Size\(\[(?P<input>{_DIMS})\]\)\)",
       "the loss's output and target shapes differ", detail=shapes.loss_target_shape),
    _k("target-shape", "TD108",
       rf"Expected target size \[(?P<input>{_DIMS})\], got \[(?P<target>{_DIMS})\]",
       "the loss's target has the wrong shape for the output", detail=shapes.loss_target_shape),
    _k("loss-batch-size", "TD108",
       r"Expected input batch_size \((?P<input>\d+)\) to match target batch_size "
       r"\((?P<target>\d+)\)",
       "the loss received outputs and targets of different batch sizes",
       detail=shapes.batch_size_mismatch),
    _k("broadcast", "TD108",
       r"The size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\) at "
       r"non-singleton dimension (?P<dim>\d+)",
       "an elementwise operation received shapes that cannot broadcast",
       detail=shapes.broadcast_mismatch),
    _k("view-size", "TD108",
       r"shape '\[(?P<shape>[-\d, ]*)\]' is invalid for input of size (?P<size>\d+)",
       "a view or reshape asked for a shape that does not hold the tensor",
       detail=shapes.view_size),
    _k("concat-sizes", "TD108",
       r"Sizes of tensors must match except in dimension (?P<dim>\d+)\. (?:Expected|Got) "
       r"(?:size )?(?P<expected>\d+) (?:but got|and) (?:size )?(?P<got>\d+) "
       r"(?:\(The offending index is |for tensor number )(?P<index>\d+)",
       "tensors of different sizes were concatenated", detail=shapes.concat_mismatch),
    # -- targets and indices -----------------------------------------------------------------
    _k("class-index", "TD403",
       r"Target (?P<target>-?\d+) is out of bounds|Assertion `(?:cur_target|t) >= 0 && "
       r"(?:cur_target|t) < n_classes['`] failed",
       "a class index in the targets is outside the model's output range",
       detail=data.class_index),
    _k("index-out-of-range", "TD004", r"index out of range in self",
       "an index is outside the tensor it indexes",
       "Check the largest index against the size of the indexed dimension; for embeddings, "
       "size the table from the vocabulary.", detail=data.embedding_index),
    _k("device-assert", "TD004", r"device-side assert triggered",
       "a CUDA kernel assertion failed", detail=data.device_assert),
    # -- autograd ----------------------------------------------------------------------------
    _k("no-graph", "TD209", r"element 0 of tensors does not require grad and does not have "
       r"a grad_fn", "backward() was called on a tensor outside any graph",
       detail=autograd.no_graph),
    _k("freed-graph", "TD219", r"Trying to backward through the graph a second time",
       "backward() went through a freed graph", detail=autograd.freed_graph),
    _k("inplace-saved", "TD220",
       rf"one of the variables needed for gradient computation has been modified by an "
       rf"inplace operation(?:: \[[\w.]+ \[(?P<shape>{_DIMS})\]\], which is output \d+ of "
       r"(?P<grad_fn>\w+), is at version (?P<version>\d+); expected version (?P<expected>\d+))?|"
       r"is a view and is being modified inplace|is a view and its base or another view of its "
       r"base has been modified inplace",
       "a tensor saved for backward was modified in place",
       detail=autograd.inplace_saved_tensor),
    _k("leaf-inplace", "TD004",
       r"a (?:view of a )?leaf Variable that requires grad is (?:being used in|used in) an "
       r"in-place operation",
       "a parameter (a leaf that requires grad) was modified in place while autograd records",
       "Update parameters by hand only inside `with torch.no_grad():` (or use an optimizer); "
       "for initialisation use `torch.nn.init` functions, which do that for you."),
    _k("inference-tensor", "TD004", r"Inference tensors cannot be saved for backward",
       "a tensor created under `torch.inference_mode()` was used in training",
       "Create tensors used for training outside `torch.inference_mode()` (use "
       "`torch.no_grad()` for caches you later train with), or `.clone()` them first."),
    _k("non-scalar-backward", "TD004", r"grad can be implicitly created only for scalar outputs",
       "backward() was called on a loss with more than one element",
       "Reduce the loss to a scalar (`loss.mean()`, or the loss's default `reduction='mean'`) "
       "before `backward()`."),
    _k("non-scalar-item", "TD004",
       r"a Tensor with (?P<count>\d+) elements cannot be converted to Scalar",
       "`.item()` or `float()` was called on a tensor with more than one element",
       "Reduce the tensor first (`loss.mean().item()`), or check that the loss was not built "
       "with `reduction='none'`."),
    _k("numpy-requires-grad", "TD004", r"Can't call numpy\(\) on Tensor that requires grad",
       "a tensor still attached to the graph was converted to NumPy",
       "Use `tensor.detach().cpu().numpy()` for logging and metrics."),
    _k("numpy-on-device", "TD004", r"can't convert (?P<device>\w+(?::\d+)?) device type tensor "
       r"to numpy", "a tensor on an accelerator was converted to NumPy",
       "Use `tensor.detach().cpu().numpy()`."),
    _k("fp16-unscale", "TD004", r"Attempting to unscale FP16 gradients",
       "GradScaler was used with a model whose parameters are float16",
       "Keep the parameters in float32 (drop `model.half()`) and let `torch.autocast` run the "
       "forward pass in float16; GradScaler needs float32 master weights."),
    # -- checkpoints -------------------------------------------------------------------------
    _k("cuda-checkpoint-on-cpu", "TD004",
       r"Attempting to deserialize object on a CUDA device but torch\.cuda\.is_available\(\) "
       r"is False", "a checkpoint saved on a GPU was loaded on a machine without one",
       "Load it with `torch.load(path, map_location='cpu')` (or the device you train on)."),
    _k("state-dict-mismatch", "TD004",
       r"Error\(s\) in loading state_dict for (?P<model>\w+)",
       "the checkpoint's keys or shapes do not match the model",
       "Compare the keys with `torchdoctor ckpt diff`; strip a `module.` (DDP) or `_orig_mod.` "
       "(torch.compile) prefix before loading; a size mismatch means the model was built with "
       "other hyper-parameters than the checkpoint."),
    _k("worker-raised", "TD004",
       r"Caught (?P<error>\w+) in DataLoader worker process (?P<worker>\d+)",
       "the Dataset code raised inside a DataLoader worker", detail=data.worker_raised),
    # -- distributed and compile -------------------------------------------------------------
    _k("ddp-unused-parameters", "TD208",
       r"Expected to have finished reduction in the prior iteration before starting a new one",
       "DDP waited for gradients of parameters that took no part in the loss",
       "Make every parameter contribute to the loss, freeze the unused ones "
       "(`requires_grad_(False)`) before wrapping in DDP, or pass "
       "`find_unused_parameters=True` (slower).", detail=unused_parameters),
    _k("compile-fullgraph", "TD707", r".*",
       "torch.compile met code it cannot put in the graph (a graph break) while "
       "`fullgraph=True` forbids breaks",
       "Rewrite the construct the message names (data-dependent `if`, `.item()`, printing, "
       "unsupported calls), or drop `fullgraph=True` to let it split the graph.",
       types=("torch._dynamo.exc.Unsupported", "torch._dynamo.exc.UserError")),
    _k("compile-backend", "TD004", r".*", "the torch.compile backend failed to compile a graph",
       "Retry with `backend='aot_eager'` to tell a backend bug from a tracing problem; run "
       "without `torch.compile` to see the model's own error.",
       types=("torch._dynamo.exc.BackendCompilerFailed",)),
)
# fmt: on


def match_known_error(
    type_names: tuple[str, ...], text: str
) -> tuple[KnownError, re.Match[str]] | None:
    """The first known error matching an exception's class names and text, with its match.

    ``type_names`` are the qualified names (``torch._dynamo.exc.Unsupported``) of the
    exception's class and its bases, so an entry matches subclasses too.
    """
    for entry in KNOWN_ERRORS:
        if entry.types and not set(entry.types) & set(type_names):
            continue
        match = entry.pattern.search(text)
        if match is not None:
            return entry, match
    return None
