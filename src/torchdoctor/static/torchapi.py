"""What lint knows about PyTorch's API, kept as data: the one table of torch facts.

Nothing here imports torch, so lint, pre-flight and the runtime can all ask it. Qualified
names are canonicalised so that every spelling of a class compares equal
(``torch.nn.modules.loss.CrossEntropyLoss`` is ``torch.nn.CrossEntropyLoss``). A *family*
is a base class lint reasons about (:data:`MODULE`, :data:`OPTIMIZER`, :data:`SCHEDULER`,
:data:`SAMPLER`, :data:`LOSS`...); :func:`in_family` says whether a qualified class name
belongs to one. Name hints (:func:`hinted_family`) are the fallback when a value's type
cannot be seen, for example a function parameter called ``optimizer``. Layer facts:
:data:`PARAMETER_FREE_LAYERS` (:func:`holds_no_parameters`), layers whose dropout is
optional (:func:`without_dropout`), layers and functions that behave differently in
eval mode (:data:`MODE_SENSITIVE_WORDS`, :data:`MODE_SENSITIVE_FUNCTIONS`); wrappers:
:data:`DDP`, :data:`DATA_PARALLEL`, :data:`FSDP1`, :data:`FSDP2`, and
:data:`DISTRIBUTED_SAMPLER`; what shows a program runs as several processes
(:data:`MULTI_PROCESS_CALLS`, :data:`MULTI_PROCESS_CLASSES`), FSDP's sharding strategies;
losses (:class:`LossKind`, :data:`LOSS_FUNCTIONS`, :data:`LOSS_CLASSES`,
:data:`LOSS_SPELLINGS`); epoch-counting schedulers (:data:`EPOCH_SCHEDULERS`); gradient
clipping (:data:`CLIP_GRAD_NORM`...); float dtypes (:data:`FLOAT_DTYPES`). A rule that
needs a list of torch names adds it here rather than keeping its own.
"""

from __future__ import annotations

import ast
import enum
import functools
import re

__all__ = [
    "ACTIVATION_FUNCTIONS",
    "ACTIVATION_LAYERS",
    "ACTIVATION_METHODS",
    "AMP_DEVICE_FIRST",
    "AMP_NAMES",
    "CLIP_GRADS_WITH_NORM",
    "CLIP_GRAD_NORM",
    "CLIP_GRAD_NORM_ONLY_ARGUMENTS",
    "CLIP_GRAD_VALUE",
    "CONSTANT_FACTORIES",
    "CONTAINERS",
    "CUDNN_BENCHMARK",
    "CUDNN_DETERMINISTIC",
    "DATALOADER",
    "DATA_PARALLEL",
    "DDP",
    "DEPRECATED_AMP",
    "DISTRIBUTED_SAMPLER",
    "DROPOUT_FUNCTIONS",
    "EMPTY_CACHE",
    "EPOCH_SCHEDULERS",
    "FAMILIES",
    "FLOAT64_DTYPES",
    "FLOAT_DTYPES",
    "FSDP1",
    "FSDP2",
    "FSDP_SHARDING_STRATEGIES",
    "GRADCHECK",
    "GRAD_OFF",
    "GRAD_ON",
    "GRAD_SCALER",
    "GRAD_SCOPES",
    "LAST_EPOCH_PLACE",
    "LOSS",
    "LOSS_CLASSES",
    "LOSS_FUNCTIONS",
    "LOSS_SPELLINGS",
    "LR_SCHEDULER_PREFIX",
    "MEANING_KEEPING_METHODS",
    "MODE_FREE_LAYERS",
    "MODE_FREE_LIBRARIES",
    "MODE_SENSITIVE_FUNCTIONS",
    "MODE_SENSITIVE_WORDS",
    "MODULE",
    "MULTI_PROCESS_CALLS",
    "MULTI_PROCESS_CLASSES",
    "MULTI_PROCESS_CLASS_NAMES",
    "NARROWER_THAN_FLOAT64",
    "NO_DROPOUT",
    "TRAIN_MODE_EXACT",
    "OPTIMIZER",
    "PARAMETER",
    "PARAMETER_FREE_AUDIO_TRANSFORMS",
    "PARAMETER_FREE_LAYERS",
    "RAW_SCORE_FUNCTIONS",
    "RAW_SCORE_LAYERS",
    "SAMPLER",
    "SCALAR_FACTORIES",
    "SENSITIVE_SOLVERS",
    "SCHEDULER",
    "SET_DEFAULT_DTYPE",
    "SET_GRAD_ENABLED",
    "SHAPED_FACTORIES",
    "TENSOR_RESULTS",
    "WRAPPER_NAMES",
    "LossKind",
    "activation_of",
    "canonical",
    "hinted_family",
    "holds_no_parameters",
    "in_family",
    "name_tokens",
    "tracks_running_stats",
    "train_mode_exact",
    "without_dropout",
]

MODULE = "torch.nn.Module"
OPTIMIZER = "torch.optim.Optimizer"
SCHEDULER = "torch.optim.lr_scheduler.LRScheduler"
GRAD_SCALER = "torch.amp.GradScaler"
DATALOADER = "torch.utils.data.DataLoader"
SAMPLER = "torch.utils.data.Sampler"
LOSS = "torch.nn.modules.loss._Loss"
FAMILIES = (MODULE, OPTIMIZER, SCHEDULER, GRAD_SCALER, DATALOADER, SAMPLER, LOSS)

# Distributed wrappers and samplers, by canonical name (and the other spellings rules match).
DDP = "torch.nn.parallel.DistributedDataParallel"
DATA_PARALLEL = "torch.nn.parallel.DataParallel"
FSDP1 = (
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
)
FSDP2 = ("torch.distributed.fsdp.fully_shard", "torch.distributed._composable.fsdp.fully_shard")
DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
# A wrapper's class name, as messages spell it.
WRAPPER_NAMES = {DDP: "DistributedDataParallel", DATA_PARALLEL: "DataParallel"}
# torch.distributed functions whose call shows that a program runs as several processes
# (importing torch.distributed alone does not: a checkpoint converter uses it in one).
MULTI_PROCESS_CALLS = frozenset(
    {
        "init_process_group",
        "get_rank",
        "get_world_size",
        "barrier",
        "all_reduce",
        "broadcast",
        "all_gather",
        "new_group",
        "fully_shard",
    }
)
# Classes whose construction shows the same (Accelerate's launcher among them).
MULTI_PROCESS_CLASSES = (DDP, DISTRIBUTED_SAMPLER, "accelerate.Accelerator", FSDP1[0])
# Their bare names, as a call to one of them reads in a file.
MULTI_PROCESS_CLASS_NAMES = frozenset(name.rpartition(".")[2] for name in MULTI_PROCESS_CLASSES)
# FSDP1 ``ShardingStrategy`` members that shard gradients (``NO_SHARD`` does not).
FSDP_SHARDING_STRATEGIES = frozenset(
    {"FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"}
)

# torch.nn layers that hold no parameters whatever their arguments (activations, dropout,
# pooling, padding, resampling, reshaping, losses): a plain list of them loses nothing, and one
# replaced after the optimizer was built leaves no parameter behind. Each was checked on
# torch 2.x: ``list(layer.parameters()) == []``. Layers with optional parameters
# (``affine=``, ``elementwise_affine=``) and ``nn.PReLU`` are not here.
PARAMETER_FREE_LAYERS = frozenset(
    f"torch.nn.{name}"
    for name in (
        # activations
        "Identity",
        "ReLU",
        "ReLU6",
        "RReLU",
        "LeakyReLU",
        "GELU",
        "SiLU",
        "Mish",
        "ELU",
        "SELU",
        "CELU",
        "Sigmoid",
        "Tanh",
        "Softmax",
        "LogSoftmax",
        "Softmax2d",
        "Softmin",
        "Softplus",
        "Softsign",
        "Hardtanh",
        "Hardswish",
        "Hardsigmoid",
        "Hardshrink",
        "Softshrink",
        "Tanhshrink",
        "Threshold",
        "GLU",
        "LogSigmoid",
        # dropout
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "FeatureAlphaDropout",
        # reshaping
        "Flatten",
        "Unflatten",
        "PixelShuffle",
        "PixelUnshuffle",
        "ChannelShuffle",
        "Fold",
        "Unfold",
        # pooling
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "MaxUnpool1d",
        "MaxUnpool2d",
        "MaxUnpool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "FractionalMaxPool2d",
        "FractionalMaxPool3d",
        "LPPool1d",
        "LPPool2d",
        "LPPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "AdaptiveMaxPool3d",
        # resampling
        "Upsample",
        "UpsamplingNearest2d",
        "UpsamplingBilinear2d",
        # padding
        "ZeroPad1d",
        "ZeroPad2d",
        "ZeroPad3d",
        "ConstantPad1d",
        "ConstantPad2d",
        "ConstantPad3d",
        "ReflectionPad1d",
        "ReflectionPad2d",
        "ReflectionPad3d",
        "ReplicationPad1d",
        "ReplicationPad2d",
        "ReplicationPad3d",
        "CircularPad1d",
        "CircularPad2d",
        "CircularPad3d",
        # normalisation without weights, distances
        "LocalResponseNorm",
        "CrossMapLRN2d",
        "CosineSimilarity",
        "PairwiseDistance",
        # losses (class weights are buffers or plain attributes, not parameters); not
        # `TripletMarginWithDistanceLoss`, whose distance function may be a module, nor
        # `AdaptiveLogSoftmaxWithLoss` and `LinearCrossEntropyLoss`, which hold layers
        "L1Loss",
        "MSELoss",
        "HuberLoss",
        "SmoothL1Loss",
        "CrossEntropyLoss",
        "NLLLoss",
        "NLLLoss2d",
        "PoissonNLLLoss",
        "GaussianNLLLoss",
        "KLDivLoss",
        "BCELoss",
        "BCEWithLogitsLoss",
        "CTCLoss",
        "MarginRankingLoss",
        "HingeEmbeddingLoss",
        "CosineEmbeddingLoss",
        "SoftMarginLoss",
        "MultiLabelMarginLoss",
        "MultiLabelSoftMarginLoss",
        "MultiMarginLoss",
        "TripletMarginLoss",
    )
)
PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})

# Normalisation layers whose parameters after `num_features` are `eps`, then `momentum`:
# a second positional argument is `eps`, often meant as `momentum`.
EPS_BEFORE_MOMENTUM = frozenset(
    f"torch.nn.{name}"
    for name in (
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "SyncBatchNorm",
        "InstanceNorm1d",
        "InstanceNorm2d",
        "InstanceNorm3d",
    )
)

# torch.nn layers (matched by a word of their class name) and functions that behave
# differently in train and eval mode.
MODE_SENSITIVE_WORDS = (
    "Dropout",
    "BatchNorm",
    "InstanceNorm",
    "Transformer",
    "MultiheadAttention",
    "LSTM",
    "GRU",
    "RNN",
)
# torch.nn.functional's dropouts, whose ``training`` argument defaults to True.
DROPOUT_FUNCTIONS = (
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "alpha_dropout",
    "feature_alpha_dropout",
)
MODE_SENSITIVE_FUNCTIONS = frozenset(
    {
        *(f"torch.nn.functional.{name}" for name in DROPOUT_FUNCTIONS),
        "torch.nn.functional.batch_norm",
        "torch.nn.functional.instance_norm",
        "torch.dropout",
    }
)

# Floating-point dtypes, every spelling; and the two spellings of float64.
FLOAT_DTYPES = frozenset(
    f"torch.{name}"
    for name in ("float16", "half", "bfloat16", "float64", "double", "float32", "float")
)
FLOAT64_DTYPES = frozenset({"torch.float64", "torch.double"})

# Dtypes a float64 value may be cast down to (anything but float64 itself).
NARROWER_THAN_FLOAT64 = frozenset(
    f"torch.{name}"
    for name in (
        "float32",
        "float",
        "float16",
        "half",
        "bfloat16",
        "int64",
        "long",
        "int32",
        "int",
        "bool",
    )
)
# Calls that change the default dtype of every later factory.
SET_DEFAULT_DTYPE = frozenset({"torch.set_default_dtype", "torch.set_default_tensor_type"})
# Numerical gradient checks: float64 is what they need.
GRADCHECK = frozenset(
    f"torch.autograd.{name}"
    for name in ("gradcheck", "gradgradcheck", "gradcheck.gradcheck", "gradcheck.gradgradcheck")
)
# Factorisations, inverses, determinants and eigen problems: float32's seven digits break
# down on ill-conditioned matrices, so programs that run them may need float64.
SENSITIVE_SOLVERS = frozenset(
    [
        f"torch.linalg.{name}"
        for name in (
            "solve",
            "solve_ex",
            "solve_triangular",
            "inv",
            "inv_ex",
            "pinv",
            "cholesky",
            "cholesky_ex",
            "eig",
            "eigh",
            "eigvals",
            "eigvalsh",
            "lstsq",
            "det",
            "slogdet",
            "cond",
            "lu",
            "lu_factor",
            "lu_solve",
        )
    ]
    + [
        f"torch.{name}"
        for name in (
            "cholesky",
            "cholesky_solve",
            "cholesky_inverse",
            "inverse",
            "pinverse",
            "det",
            "logdet",
            "slogdet",
            "triangular_solve",
            "lu",
            "lu_solve",
        )
    ]
)

# Tensor factories. Scalar ones infer the dtype from their data; shaped ones take a size
# and default to the default dtype; constant ones build a tensor on the default device
# from constants; every name in TENSOR_RESULTS always returns a tensor.
SCALAR_FACTORIES = frozenset({"torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})
SHAPED_FACTORIES = frozenset({"torch.zeros", "torch.ones", "torch.empty", "torch.full"})
_LEGACY_CONSTRUCTORS = ("Tensor", "FloatTensor", "LongTensor")
CONSTANT_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor",
        "as_tensor",
        "ones",
        "zeros",
        "full",
        "arange",
        "linspace",
        "logspace",
        "eye",
        *_LEGACY_CONSTRUCTORS,
    )
)
TENSOR_RESULTS = frozenset(
    f"torch.{name}"
    for name in (
        "tensor",
        "as_tensor",
        "from_numpy",
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "zeros_like",
        "ones_like",
        "empty_like",
        "full_like",
        "rand_like",
        "randn_like",
        "randint_like",
        "cat",
        "concat",
        "stack",
        "where",
        "matmul",
        "bmm",
        "mm",
        "einsum",
        *_LEGACY_CONSTRUCTORS,
    )
)

# Grad-mode context managers and the call that sets the mode either way.
GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode"})
GRAD_ON = frozenset({"torch.enable_grad"})
GRAD_SCOPES = ("torch.no_grad", "torch.enable_grad", "torch.inference_mode")
SET_GRAD_ENABLED = "torch.set_grad_enabled"

# Module containers: their mode and parameters are their children's.
CONTAINERS = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict"})

# Every spelling of "release the accelerator's cached memory".
EMPTY_CACHE = (
    "torch.cuda.empty_cache",
    "torch.cuda.memory.empty_cache",
    "torch.mps.empty_cache",
    "torch.xpu.empty_cache",
    "torch.xpu.memory.empty_cache",
    "torch.accelerator.empty_cache",
    "torch.accelerator.memory.empty_cache",
)

# cuDNN flags a program sets by assignment.
CUDNN_BENCHMARK = "torch.backends.cudnn.benchmark"
CUDNN_DETERMINISTIC = "torch.backends.cudnn.deterministic"

# Mixed precision: names under torch.cuda.amp (deprecated) that moved to torch.amp, and
# those of them that take the device type first there.
AMP_NAMES = frozenset({"autocast", "GradScaler", "custom_fwd", "custom_bwd"})
DEPRECATED_AMP = frozenset(f"torch.cuda.amp.{name}" for name in AMP_NAMES)
AMP_DEVICE_FIRST = frozenset({"autocast", "GradScaler"})

# Learning-rate schedulers (torch.optim.lr_scheduler.<name>) that count epochs, with the
# argument (position, keyword) that says how long they run, or None when none does.
LR_SCHEDULER_PREFIX = "torch.optim.lr_scheduler."
EPOCH_SCHEDULERS: dict[str, tuple[int, str] | None] = {
    "StepLR": (1, "step_size"),
    "MultiStepLR": (1, "milestones"),
    "ExponentialLR": (1, "gamma"),
    "ReduceLROnPlateau": None,
    "CosineAnnealingLR": (1, "T_max"),
}

# Where each torch scheduler takes ``last_epoch`` among its positional arguments (the
# position it resumes from), optimizer first.
LAST_EPOCH_PLACE: dict[str, int] = {
    "LambdaLR": 2,
    "MultiplicativeLR": 2,
    "ExponentialLR": 2,
    "StepLR": 3,
    "MultiStepLR": 3,
    "ConstantLR": 3,
    "CosineAnnealingLR": 3,
    "PolynomialLR": 3,
    "SequentialLR": 3,
    "LinearLR": 4,
    "CosineAnnealingWarmRestarts": 4,
    "CyclicLR": 12,
    "OneCycleLR": 13,
}

# Activations a value can end in, by the function or layer class that applies it; the
# tensor methods of the same names apply them too. Layers and functions that give raw scores.
ACTIVATION_FUNCTIONS = {
    "torch.softmax": "softmax",
    "torch.nn.functional.softmax": "softmax",
    "torch.special.softmax": "softmax",
    "torch.log_softmax": "log_softmax",
    "torch.nn.functional.log_softmax": "log_softmax",
    "torch.special.log_softmax": "log_softmax",
    "torch.sigmoid": "sigmoid",
    "torch.nn.functional.sigmoid": "sigmoid",
    "torch.special.expit": "sigmoid",
}
ACTIVATION_LAYERS = {
    "torch.nn.Softmax": "softmax",
    "torch.nn.LogSoftmax": "log_softmax",
    "torch.nn.Sigmoid": "sigmoid",
}
ACTIVATION_METHODS = ("softmax", "log_softmax", "sigmoid")
# Tensor methods that keep what a value means (probabilities stay probabilities). Not
# `detach`: a loss of detached values trains nothing, it is a metric.
MEANING_KEEPING_METHODS = frozenset(
    {
        "squeeze",
        "unsqueeze",
        "view",
        "reshape",
        "flatten",
        "contiguous",
        "permute",
        "transpose",
        "float",
        "double",
        "half",
        "to",
        "type",
        "view_as",
        "reshape_as",
        "clone",
        "squeeze_",
        "unsqueeze_",
        "cpu",
        "cuda",
    }
)
RAW_SCORE_FUNCTIONS = frozenset({"torch.nn.functional.linear"})
RAW_SCORE_LAYERS = frozenset(
    {
        "torch.nn.Linear",
        "torch.nn.LazyLinear",
        "torch.nn.Bilinear",
        "torch.nn.Conv1d",
        "torch.nn.Conv2d",
        "torch.nn.Conv3d",
        "torch.nn.LazyConv1d",
        "torch.nn.LazyConv2d",
        "torch.nn.LazyConv3d",
    }
)

# Gradient clipping functions, with their older spellings.
CLIP_GRAD_NORM = (
    "torch.nn.utils.clip_grad_norm_",
    "torch.nn.utils.clip_grad_norm",
    "torch.nn.utils.clip_grad.clip_grad_norm_",
    "torch.nn.utils.clip_grad.clip_grad_norm",
)
CLIP_GRAD_VALUE = ("torch.nn.utils.clip_grad_value_", "torch.nn.utils.clip_grad.clip_grad_value_")
CLIP_GRADS_WITH_NORM = "torch.nn.utils.clip_grads_with_norm_"
# Arguments of torch's ``clip_grad_norm_`` that FSDP1's ``clip_grad_norm_`` method lacks.
CLIP_GRAD_NORM_ONLY_ARGUMENTS = frozenset({"foreach", "error_if_nonfinite"})


class LossKind(enum.Enum):
    """The losses lint reasons about in depth (what their input must be), by class name."""

    CROSS_ENTROPY = "CrossEntropyLoss"
    NLL = "NLLLoss"
    BCE = "BCELoss"
    BCE_WITH_LOGITS = "BCEWithLogitsLoss"


# The functional spelling and the module class of each.
LOSS_FUNCTIONS = {
    "torch.nn.functional.cross_entropy": LossKind.CROSS_ENTROPY,
    "torch.nn.functional.nll_loss": LossKind.NLL,
    "torch.nn.functional.binary_cross_entropy": LossKind.BCE,
    "torch.nn.functional.binary_cross_entropy_with_logits": LossKind.BCE_WITH_LOGITS,
}
LOSS_CLASSES = {f"torch.nn.{kind.value}": kind for kind in LossKind}
# How those losses are spelled in source (cross entropy, NLL, BCE with logits): a file
# with none of them has no loss input to judge.
LOSS_SPELLINGS = (
    "cross_entropy",
    "CrossEntropyLoss",
    "nll_loss",
    "NLLLoss",
    "BCEWithLogitsLoss",
    "binary_cross_entropy_with_logits",
)

# Spelling -> canonical spelling, by prefix. Longest prefix first.
_SUBMODULE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("torch.autograd.grad_mode.", "torch."),
    ("torch.amp.grad_scaler.", "torch.amp."),
    ("torch.amp.autocast_mode.", "torch.amp."),
    ("torch.cuda.amp.grad_scaler.", "torch.cuda.amp."),
    ("torch.cuda.amp.autocast_mode.", "torch.cuda.amp."),
    ("torch.nn.parallel.distributed.", "torch.nn.parallel."),
    ("torch.nn.parallel.data_parallel.", "torch.nn.parallel."),
    ("torch.utils.data.dataloader.", "torch.utils.data."),
    ("torch.utils.data.distributed.", "torch.utils.data."),
    ("torch.utils.data.sampler.", "torch.utils.data."),
    ("torch.utils.data.dataset.", "torch.utils.data."),
)
_EXACT: dict[str, str] = {
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.enable_grad": "torch.enable_grad",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.nn.DataParallel": "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel": "torch.nn.parallel.DistributedDataParallel",
    "torch.GradScaler": "torch.amp.GradScaler",
}
_NON_MODULES = frozenset(
    {
        "torch.nn.Parameter",
        "torch.nn.Buffer",
        "torch.nn.UninitializedParameter",
        "torch.nn.UninitializedBuffer",
        "torch.nn.Module",
    }
)
_NOT_OPTIMIZERS = ("torch.optim.lr_scheduler", "torch.optim.swa_utils")


@functools.lru_cache(maxsize=4096)
def canonical(name: str) -> str:
    """The canonical spelling of a qualified name. It changes the modules a name is
    spelled through, never its last component (``is_call_to`` relies on that)."""
    exact = _EXACT.get(name)
    if exact is not None:
        return exact
    if name.startswith("torch.nn.modules."):
        head, _, last = name.rpartition(".")
        if last[:1].isupper() and head.count(".") == 3:
            return "torch.nn." + last
    for prefix, replacement in _SUBMODULE_PREFIXES:
        if name.startswith(prefix):
            return _EXACT.get(replacement + name[len(prefix) :], replacement + name[len(prefix) :])
    if name.startswith("torch.optim.") and name.count(".") == 3:
        _, _, sub, last = name.split(".")
        if sub not in ("lr_scheduler", "swa_utils") and last[:1].isupper():
            return "torch.optim." + last
    return name


@functools.lru_cache(maxsize=4096)
def in_family(qualified: str, family: str) -> bool:
    """Whether the class or factory named ``qualified`` produces a ``family`` instance."""
    name = canonical(qualified)
    if name == family:
        return True
    last = name.rpartition(".")[2]
    capital = last[:1].isupper()
    if family == MODULE:
        return _is_module(name, last, capital)
    if family == LOSS:
        return capital and last.endswith("Loss") and name.startswith("torch.nn.")
    if family == OPTIMIZER:
        return _is_optimizer(name, capital)
    if family == SCHEDULER:
        return (capital and name.startswith(("torch.optim.lr_scheduler.", "timm.scheduler."))) or (
            name.startswith("transformers.") and "schedule" in last
        )
    if family == GRAD_SCALER:
        return last == "GradScaler" and name.startswith("torch.")
    if family == DATALOADER:
        return name in ("torch.utils.data.DataLoader",)
    if family == SAMPLER:
        return capital and last.endswith("Sampler") and name.startswith("torch.utils.data.")
    return False


def _is_module(name: str, last: str, capital: bool) -> bool:
    if name in _NON_MODULES:
        return False
    if name.startswith("torch.nn.") and capital:
        return not name.startswith(
            ("torch.nn.utils.", "torch.nn.functional.", "torch.nn.init.", "torch.nn.parameter.")
        )
    if name.startswith(("torchvision.models.", "timm.create_model", "timm.models.")):
        return True
    if name.startswith("torch.distributed.fsdp.") and last == "FullyShardedDataParallel":
        return True  # not its methods: FSDP.full_optim_state_dict(...) returns a dict
    return (
        name.startswith("transformers.")
        and "Model" in name
        and last in ("from_pretrained", "from_config")
    )


def _is_optimizer(name: str, capital: bool) -> bool:
    if name.startswith("torch.optim."):
        return capital and not name.startswith(_NOT_OPTIMIZERS)
    if name in (
        "torch.distributed.optim.ZeroRedundancyOptimizer",
        "transformers.AdamW",
        "transformers.Adafactor",
        "timm.optim.create_optimizer_v2",
        "timm.optim.create_optimizer",
    ):
        return True
    if not capital or ".lr_scheduler." in name:
        return False  # fairseq.optim.lr_scheduler.InverseSquareRootSchedule: a schedule
    if name.startswith(_OPTIMIZER_PACKAGES):
        return True
    # A third-party optimizer class outside those packages (`lion_pytorch.Lion`,
    # `came_pytorch.CAME`, `prodigyopt.Prodigy`): its class name says what it is.
    last = name.rpartition(".")[2]
    return not name.startswith("torch.") and (
        last in _OPTIMIZER_CLASS_NAMES or last.endswith(("Adam", "AdamW", "Adafactor"))
    )


# Packages whose capitalised names are optimizers.
_OPTIMIZER_PACKAGES = (
    "bitsandbytes.optim.",
    "apex.optimizers.",
    "torch_optimizer.",
    "timm.optim.",
    "fairseq.optim.",
    "deepspeed.ops.adam.",
    "deepspeed.ops.lamb.",
)
# Names of optimizer classes that third-party packages define.
_OPTIMIZER_CLASS_NAMES = frozenset(
    {"Lion", "Lamb", "LAMB", "Adafactor", "Prodigy", "MADGRAD", "AdaBelief", "CAME", "Sophia"}
    | {"SophiaG", "Adan", "Ranger", "RAdam", "SGDW", "Muon", "Shampoo", "DAdaptAdam"}
)


# Name hints: the last meaningful word of a variable or attribute name.
_HINTS: dict[str, frozenset[str]] = {
    OPTIMIZER: frozenset({"opt", "optim", "optimizer", "optimiser", "optimizers"}),
    SCHEDULER: frozenset({"sched", "scheduler", "schedulers", "lrs", "lr_scheduler"}),
    GRAD_SCALER: frozenset({"scaler", "grad_scaler", "gradscaler"}),
    MODULE: frozenset(
        {
            "model",
            "net",
            "network",
            "classifier",
            "encoder",
            "decoder",
            "backbone",
            "generator",
            "discriminator",
            "student",
            "teacher",
        }
    ),
    LOSS: frozenset({"criterion", "loss_fn", "lossfn", "loss_func", "loss_function", "criteria"}),
    DATALOADER: frozenset({"loader", "dataloader", "dl"}),
    SAMPLER: frozenset({"sampler"}),
}
# torch.nn layers whose dropout defaults to 0, with the position dropout takes among the
# positional arguments (RNN has `nonlinearity` before it): they behave differently in
# train and eval mode only when a call gives them one. Recurrent cells have no dropout.
_OPTIONAL_DROPOUT = {
    "torch.nn.LSTM": 5,
    "torch.nn.GRU": 5,
    "torch.nn.RNN": 6,
    "torch.nn.MultiheadAttention": 2,
}
MODE_FREE_LAYERS = frozenset({"torch.nn.RNNCell", "torch.nn.LSTMCell", "torch.nn.GRUCell"})
# Libraries that build no layer whose output depends on train or eval mode: I/O, storage,
# networking, progress bars, configuration, logging, plotting and array libraries. What a
# model's class calls from them (a checkpoint download, a progress bar) says nothing
# about its layers.
MODE_FREE_LIBRARIES = frozenset(
    {
        "boto3",
        "botocore",
        "cv2",
        "einops",
        "fsspec",
        "h5py",
        "hydra",
        "imageio",
        "loguru",
        "matplotlib",
        "mlflow",
        "netCDF4",
        "omegaconf",
        "pandas",
        "PIL",
        "requests",
        "rich",
        "s3fs",
        "scipy",
        "tensorboardX",
        "tqdm",
        "urllib3",
        "wandb",
        "xarray",
        "yaml",
        "zarr",
    }
)
# Appended to such a layer's name where facts record what a class builds.
NO_DROPOUT = "#no-dropout"
# Instance norms and the position of `track_running_stats`: without it they normalise each
# sample by its own statistics in both modes; with it, eval() switches them to running
# averages, while training mode keeps the per-sample statistics the model was trained with.
_INSTANCE_NORMS = {
    **{f"torch.nn.InstanceNorm{d}d": 4 for d in (1, 2, 3)},
    **{f"torch.nn.LazyInstanceNorm{d}d": 3 for d in (1, 2, 3)},
}
# Appended to an instance norm tracking running statistics: eval() changes it, but running
# it in training mode (evaluating without eval()) computes nothing wrong.
TRAIN_MODE_EXACT = "#train-mode-exact"


def activation_of(qualified: str) -> str | None:
    """``"softmax"``, ``"log_softmax"`` or ``"sigmoid"`` for the function or layer class
    ``qualified`` that applies it, else ``None``."""
    return ACTIVATION_FUNCTIONS.get(qualified) or ACTIVATION_LAYERS.get(qualified)


# torchaudio's feature transforms: no parameters, only buffers computed from their
# arguments (a window, a mel filter bank), rebuilt identically by the constructor, so a
# plain list or dict of them loses nothing a checkpoint or optimizer should hold.
PARAMETER_FREE_AUDIO_TRANSFORMS = frozenset(
    f"torchaudio.transforms.{name}"
    for name in (
        "Spectrogram",
        "InverseSpectrogram",
        "MelSpectrogram",
        "MelScale",
        "MFCC",
        "LFCC",
        "AmplitudeToDB",
        "Resample",
        "GriffinLim",
        "MuLawEncoding",
        "MuLawDecoding",
        "ComputeDeltas",
        "FrequencyMasking",
        "TimeMasking",
        "Fade",
        "Vol",
        "Preemphasis",
        "Deemphasis",
        "SpectralCentroid",
    )
)


def holds_no_parameters(qualified: str) -> bool:
    """Whether the layer class ``qualified`` (canonical) never holds parameters: a torch
    layer of :data:`PARAMETER_FREE_LAYERS` or a torchaudio feature transform."""
    return qualified in PARAMETER_FREE_LAYERS or qualified in PARAMETER_FREE_AUDIO_TRANSFORMS


# The argument (position, keyword) that gives a functional dropout or normalisation its
# mode: given, it decides, whatever mode the module calling it is in.
_MODE_ARGUMENT: dict[str, tuple[int, str]] = {
    **{f"torch.nn.functional.{name}": (2, "training") for name in DROPOUT_FUNCTIONS},
    "torch.nn.functional.batch_norm": (5, "training"),
    "torch.nn.functional.instance_norm": (5, "use_input_stats"),
    "torch.dropout": (2, "train"),
}


def _mode_given(qualified: str, call: ast.Call) -> bool:
    """A functional dropout or normalisation whose mode argument is given and does not
    read a module's ``.training`` (``training=bn_training``, a flag the caller passes):
    the module's ``eval()`` does not reach it. One that reads ``.training`` is followed
    as such where the class is read."""
    position, keyword = _MODE_ARGUMENT[qualified]
    if any(k.arg is None for k in call.keywords):
        return False
    value = next((k.value for k in call.keywords if k.arg == keyword), None)
    if value is None:
        if any(isinstance(a, ast.Starred) for a in call.args[: position + 1]):
            return False
        value = call.args[position] if len(call.args) > position else None
    return value is not None and not any(
        isinstance(node, ast.Attribute) and node.attr == "training" for node in ast.walk(value)
    )


def without_dropout(qualified: str, call: ast.Call) -> bool:
    """Whether ``call`` builds a recurrent cell (no dropout at all), or one of the layers
    whose dropout defaults to 0 (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``,
    ``nn.MultiheadAttention``) and gives it none, or a literal 0, or calls a functional
    dropout or normalisation with its mode given explicitly (not read from ``.training``):
    then ``eval()`` changes nothing in it, whatever its name says. ``*args``/``**kwargs``
    may hold one: not then."""
    if qualified in MODE_FREE_LAYERS:
        return True
    if qualified in _MODE_ARGUMENT:
        return _mode_given(qualified, call)
    if qualified in _INSTANCE_NORMS:
        return tracks_running_stats(qualified, call) is False
    position = _OPTIONAL_DROPOUT.get(qualified)
    if position is None:
        return False
    if qualified in _RECURRENT and not _stacked(call):
        return True  # dropout acts between stacked layers only: one layer has none
    known, value = _argument(call, "dropout", position)
    if not known:
        return False
    return value is None or (
        isinstance(value, ast.Constant)
        and isinstance(value.value, (int, float))
        and value.value == 0
    )


# Recurrent layers apply their dropout between stacked layers, not after the last one
# (torch warns when dropout is given to a single layer); `num_layers` is their third
# positional argument.
_RECURRENT = frozenset({"torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN"})


def _stacked(call: ast.Call) -> bool:
    """Whether a recurrent layer is shown to stack several layers: ``num_layers`` a
    literal above 1. Its default is 1; a value lint cannot read (a constructor parameter
    defaulting to 1, a config entry) does not show it, and what is not shown is not
    reported."""
    known, value = _argument(call, "num_layers", 2)
    if not known:
        return True  # `**kwargs` may stack them: read as before
    return (
        isinstance(value, ast.Constant)
        and isinstance(value.value, int)
        and not isinstance(value.value, bool)
        and value.value > 1
    )


def tracks_running_stats(qualified: str, call: ast.Call) -> bool | None:
    """For an instance norm ``call``: whether it keeps running statistics (``False``: its
    default, or a literal ``False``; ``None``: given by a variable, ``*args``/``**kwargs``,
    or ``qualified`` is no instance norm)."""
    position = _INSTANCE_NORMS.get(qualified)
    if position is None:
        return None
    known, value = _argument(call, "track_running_stats", position)
    if not known:
        return None
    if value is None:
        return False
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return value.value
    return None


def _argument(call: ast.Call, name: str, position: int) -> tuple[bool, ast.expr | None]:
    """``(known, value)`` of the argument ``name`` at ``position`` of ``call``: by keyword,
    else positionally; ``value`` is ``None`` when it is not given. Not known where
    ``*args`` or ``**kwargs`` may hold it."""
    if any(k.arg is None for k in call.keywords):
        return False, None
    value = next((k.value for k in call.keywords if k.arg == name), None)
    if value is not None:
        return True, value
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False, None
    return True, call.args[position] if len(call.args) > position else None


def train_mode_exact(qualified: str, call: ast.Call) -> bool:
    """Whether ``call`` builds a layer that eval() changes but whose training-mode output
    is still the right one to evaluate with: an instance norm (per-sample statistics)."""
    return qualified in _INSTANCE_NORMS and tracks_running_stats(qualified, call) is not False


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def name_tokens(name: str) -> list[str]:
    """Lower-case words of an identifier: ``optimizerD`` -> ``["optimizer", "d"]``."""
    return list(_name_tokens(name))


@functools.lru_cache(maxsize=8192)
def _name_tokens(name: str) -> tuple[str, ...]:
    # Rules ask about the same identifiers again and again (every assignment's target).
    return tuple(t for t in re.split(r"[_\d]+", _CAMEL.sub("_", name).lower()) if t)


@functools.lru_cache(maxsize=4096)
def hinted_family(name: str) -> str | None:
    """The family a variable name suggests, or ``None``.

    The last word that is not a single letter or a number decides: ``optimizer_g``,
    ``g_optimizer`` and ``optimizerD`` are optimizers, ``opt_level`` is not.
    """
    tokens = name_tokens(name)
    words = [t for t in tokens if len(t) > 1 and not t.isdigit()]
    if not words:
        return None
    last = words[-1]
    joined = "_".join(words[-2:])
    for family, hints in _HINTS.items():
        if last in hints or joined in hints:
            return family
    return None
