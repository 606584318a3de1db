"""The catalogue: one entry per problem, shared by every depth.

A code is never reused or renumbered; a retired rule stays here with ``removed=True``.
The hundreds digit is the topic (:class:`Topic`). Which depths detect a rule is part of
its record and is checked against the registered detectors by the test suite.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torchdoctor.errors import UnknownRuleError, UsageError
from torchdoctor.findings import Confidence, Depth, Finding, Fix, Location, Severity

__all__ = [
    "RULES",
    "Rule",
    "Topic",
    "UnknownRuleError",
    "finding",
    "get_rule",
    "register_custom_rule",
]


class Topic(enum.Enum):
    """What a rule is about; the hundreds digit of its code."""

    TOOL_AND_ENVIRONMENT = 0
    DEVICE_AND_DTYPE = 1
    AUTOGRAD = 2
    LOSS = 3
    DATA = 4
    TRAIN_EVAL_MODE = 5
    OPTIMIZER = 6
    MEMORY_AND_PERFORMANCE = 7
    DISTRIBUTED = 8
    CHECKPOINT_AND_REPRODUCIBILITY = 9
    CUSTOM = 10  # a user's own rules, TDX + 3 digits (see torchdoctor.custom)

    @property
    def title(self) -> str:
        """Human title, e.g. ``"Device and dtype"``."""
        return self.name.replace("_", " ").capitalize()


@dataclass(frozen=True, slots=True)
class Rule:
    """One problem torchdoctor knows about.

    Attributes:
        code: ``TD`` + 3 digits, stable forever.
        name: kebab-case name of the problem (not of the detector).
        severity: default severity of its findings.
        depths: the depths that detect it.
        summary: one line saying the problem.
        meta: a status of torchdoctor itself (its own internal error), not a problem of
            the user's program: it has no lab pair and no detector of its own.
        removed: retired rules keep their code and never fire.
    """

    code: str
    name: str
    severity: Severity
    depths: frozenset[Depth]
    summary: str
    meta: bool = False
    removed: bool = False

    @property
    def topic(self) -> Topic:
        """The topic, from the hundreds digit of the code (``CUSTOM`` for ``TDX`` codes)."""
        return Topic(int(self.code[2])) if self.code[2].isdigit() else Topic.CUSTOM

    @property
    def slug(self) -> str:
        """``TD201-grads-never-cleared``: the lab folder name."""
        return f"{self.code}-{self.name}"


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
LINT, CHECK, RUN, CKPT, ENV = Depth.LINT, Depth.CHECK, Depth.RUN, Depth.CKPT, Depth.ENV


def _r(
    code: str, name: str, severity: Severity, depths: Iterable[Depth], summary: str, **extra: Any
) -> Rule:
    return Rule(code, name, severity, frozenset(depths), summary, **extra)


# fmt: off
_TABLE: tuple[Rule, ...] = (
    # 0xx: torchdoctor itself and the environment
    _r("TD001", "internal-error", E, (LINT, CHECK, RUN, CKPT, ENV),
       "torchdoctor itself failed; the report may be incomplete", meta=True),
    _r("TD002", "unparsable-source", E, (LINT,),
       "A source file could not be read or parsed as Python"),
    _r("TD003", "torch-warning", W, (RUN,),
       "PyTorch emitted a warning during the run"),
    _r("TD004", "script-raised", E, (RUN,),
       "The training script died of an exception"),
    _r("TD010", "cuda-launch-blocking-set", W, (ENV,), "CUDA_LAUNCH_BLOCKING is set"),
    _r("TD011", "threads-oversubscribe-cores", W, (ENV,), "More threads than usable CPUs"),
    _r("TD012", "thread-variable-ignored", W, (ENV,), "torch ignores OMP/MKL_NUM_THREADS"),
    _r("TD013", "default-dtype-changed", W, (ENV,), "The default dtype is not float32"),
    _r("TD014", "debug-variables-left-on", W, (ENV,), "Costly debugging variables are set"),
    _r("TD015", "anomaly-detection-enabled", W, (ENV,), "Autograd anomaly detection is on"),
    # 1xx: device and dtype
    _r("TD101", "device-mismatch", E, (CHECK, RUN),
       "Parameters, buffers and inputs live on different devices"),
    _r("TD102", "float64-in-training", W, (LINT, CHECK, CKPT),
       "float64 tensors in a training program: twice the memory, far slower on GPUs"),
    _r("TD103", "mixed-parameter-dtypes", W, (CHECK,),
       "The model's parameters have more than one floating dtype"),
    _r("TD104", "target-dtype-wrong-for-loss", E, (LINT, CHECK, RUN),
       "The target's dtype does not match what the loss function expects"),
    _r("TD105", "legacy-tensor-constructor", W, (LINT,),
       "Legacy constructor (torch.Tensor(shape), torch.FloatTensor) builds uninitialised "
       "or CPU-only tensors"),
    _r("TD106", "constant-tensor-moved-in-loop", INFO, (LINT,),
       "A constant tensor is built on the CPU and copied to the device every iteration"),
    _r("TD107", "dtype-mismatch", E, (RUN,),
       "An operation received tensors of different dtypes"),
    _r("TD108", "shape-mismatch", E, (RUN,),
       "A layer received an input of the wrong shape"),
    _r("TD109", "rnn-output-read-batch-first", E, (LINT, CHECK, RUN),
       "A sequence-first RNN's output is indexed as if it were batch-first"),
    # 2xx: autograd and gradients
    _r("TD201", "grads-never-cleared", E, (LINT, RUN),
       "Gradients are never cleared between optimizer steps"),
    _r("TD202", "backward-under-no-grad", E, (LINT,),
       "backward() is called inside torch.no_grad() or torch.inference_mode()"),
    _r("TD203", "zero-grad-between-backward-and-step", E, (LINT,),
       "zero_grad() runs after backward() and before step(), so step() sees no gradient"),
    _r("TD204", "step-before-backward", E, (LINT,),
       "optimizer.step() runs before backward() in the loop"),
    _r("TD205", "graph-retained-across-steps", W, (LINT, RUN),
       "A loss is kept across iterations with its graph, so memory grows every step"),
    _r("TD206", "forward-called-directly", W, (LINT,),
       "module.forward(x) is called directly, skipping hooks"),
    _r("TD207", "parameter-data-mutated", W, (LINT,),
       "Parameters are modified through .data, invisible to autograd"),
    _r("TD208", "parameters-without-grad", W, (CHECK, RUN),
       "Parameters that require grad never receive a gradient"),
    _r("TD209", "loss-does-not-require-grad", E, (LINT, RUN),
       "backward() was called on a tensor that is not part of a graph"),
    _r("TD210", "step-without-gradients", E, (RUN,),
       "optimizer.step() runs while no parameter has a gradient"),
    _r("TD211", "zero-gradients", W, (CHECK,),
       "Gradients are exactly zero for whole parameters"),
    _r("TD212", "non-finite-gradients", E, (CHECK, RUN),
       "Gradients contain NaN or Inf"),
    _r("TD213", "non-finite-loss", E, (CHECK, RUN),
       "The loss is NaN or Inf"),
    _r("TD214", "non-finite-parameters", E, (RUN,),
       "Parameters became NaN or Inf"),
    _r("TD215", "vanishing-gradients", W, (CHECK, RUN),
       "Gradients of the earliest layers are orders of magnitude smaller than the latest"),
    _r("TD216", "exploding-gradients", W, (RUN,),
       "Gradient norms grow by orders of magnitude during training"),
    _r("TD217", "dead-relu-units", W, (CHECK,),
       "ReLU units that output zero for every example of the batch"),
    _r("TD218", "parameters-never-change", W, (RUN,),
       "Trainable parameters keep their initial values across optimizer steps"),
    _r("TD219", "backward-through-freed-graph", E, (RUN,),
       "backward() went through a graph whose buffers were already freed"),
    _r("TD220", "inplace-modified-saved-tensor", E, (RUN,),
       "A tensor needed for backward was modified in place"),
    _r("TD221", "requires-grad-set-on-module", E, (LINT, CHECK, RUN),
       "module.requires_grad = False sets a plain attribute and freezes nothing"),
    _r("TD222", "target-network-not-detached", W, (LINT, RUN),
       "A target/teacher/EMA network's output reaches the loss with its graph"),
    _r("TD223", "layers-in-plain-container", E, (LINT,),
       "Layers kept in a plain list/dict/tuple attribute of an nn.Module are never "
       "registered"),
    _r("TD224", "tensor-result-discarded", E, (LINT,),
       "A tensor's .to()/.detach()/.float() or torch.clamp(...) result is thrown away"),
    _r("TD225", "grad-mode-call-without-with", E, (LINT,),
       "torch.no_grad()/enable_grad()/inference_mode() called as a statement does nothing"),
    _r("TD226", "output-layer-frozen-at-init", E, (LINT, CHECK, RUN),
       "The layer that computes the loss's input is frozen at its random initialisation"),
    _r("TD227", "inplace-reads-own-view", E, (LINT,),
       "An in-place update reads a view of the tensor it writes (x -= x[:, :1])"),
    _r("TD228", "backward-through-stepped-model", E, (LINT,),
       "A loss computed before another loss's optimizer step is back-propagated after it, "
       "through weights the step changed in place"),
    # 3xx: loss
    _r("TD301", "softmax-before-cross-entropy", E, (LINT, CHECK, RUN),
       "Probabilities (softmax output) are fed to a loss that applies log_softmax itself"),
    _r("TD302", "log-softmax-before-cross-entropy", INFO, (LINT, CHECK),
       "log_softmax output is fed to CrossEntropyLoss, which applies log_softmax again"),
    _r("TD303", "sigmoid-before-bce-with-logits", E, (LINT, CHECK, RUN),
       "sigmoid output is fed to BCEWithLogitsLoss, which applies sigmoid itself"),
    _r("TD304", "bce-after-sigmoid", W, (LINT,),
       "sigmoid followed by BCELoss: numerically unstable, use BCEWithLogitsLoss"),
    _r("TD305", "nll-loss-without-log-softmax", E, (LINT, CHECK, RUN),
       "NLLLoss receives raw scores instead of log-probabilities"),
    _r("TD306", "loss-target-broadcast", E, (CHECK, RUN),
       "Output and target shapes differ and the loss silently broadcasts them"),
    _r("TD307", "initial-loss-unexpected", W, (CHECK,),
       "The loss of the fresh model is far from what an untrained model should give"),
    _r("TD308", "single-logit-cross-entropy", E, (CHECK, RUN),
       "Cross-entropy over a single class: the loss is constant and gradients are zero"),
    _r("TD309", "loss-arguments-out-of-domain", E, (RUN,),
       "A loss receives targets or weights outside its domain (BCE targets outside [0, 1], "
       "negative class weights or pos_weight)"),
    _r("TD310", "labels-shifted-twice", E, (LINT,),
       "Causal-LM labels built already shifted are shifted again by the model"),
    _r("TD311", "loss-average-mismatch", W, (LINT,),
       "Mean-reduced batch losses averaged over examples (or summed ones over batches)"),
    # 4xx: data
    _r("TD401", "non-finite-inputs", E, (CHECK,),
       "The batch contains NaN or Inf"),
    _r("TD402", "inputs-not-normalised", W, (CHECK,),
       "Floating inputs look unnormalised (for example raw 0-255 pixels)"),
    _r("TD403", "class-index-out-of-range", E, (CHECK, RUN),
       "A class index in the targets is outside the model's output range"),
    _r("TD404", "single-class-batch", W, (CHECK,),
       "Every target of the batch is the same class"),
    _r("TD405", "dataloader-workers-without-main-guard", E, (LINT,),
       "DataLoader(num_workers>0) in a script without an if __name__ == '__main__' guard"),
    _r("TD406", "dataloader-created-in-loop", W, (LINT,),
       "A DataLoader is built inside the epoch loop, restarting its workers every epoch"),
    _r("TD407", "train-loader-not-shuffled", W, (LINT, CHECK),
       "The training DataLoader does not shuffle"),
    _r("TD408", "non-blocking-without-pin-memory", INFO, (LINT,),
       "non_blocking=True copies from a DataLoader without pin_memory=True"),
    _r("TD409", "input-pipeline-bound", W, (CHECK, RUN),
       "Training waits on the input pipeline for a large share of its time"),
    _r("TD410", "identical-worker-augmentations", E, (LINT, CHECK, RUN),
       "DataLoader workers draw identical random augmentations"),
    _r("TD411", "pin-memory-off-with-cuda", INFO, (CHECK,),
       "Training on CUDA from a DataLoader without pin_memory=True"),
    _r("TD412", "workers-not-persistent", INFO, (CHECK,),
       "DataLoader workers are restarted every epoch (persistent_workers=False)"),
    _r("TD413", "dataloader-worker-died", E, (RUN,),
       "A DataLoader worker process died"),
    _r("TD414", "sampler-reaches-part-of-dataset", E, (CHECK, RUN),
       "The DataLoader's sampler can never draw part of the dataset's indices"),
    _r("TD415", "evaluation-drops-examples", W, (RUN,),
       "An evaluation pass over a drop_last=True DataLoader leaves examples out"),
    _r("TD416", "sampler-never-used", W, (LINT,),
       "A sampler is built but no DataLoader ever receives it"),
    _r("TD417", "subset-transform-misapplied", E, (LINT,),
       "A transform set on one part of a random_split/Subset is ignored, or changes "
       "every part"),
    # 5xx: train/eval mode
    _r("TD501", "eval-in-train-mode", E, (LINT, RUN),
       "Evaluation runs with dropout/BatchNorm in training mode (no model.eval())"),
    _r("TD502", "train-in-eval-mode", E, (LINT, CHECK, RUN),
       "Training steps run with the model left in eval mode"),
    _r("TD503", "batchnorm-batch-of-one", E, (CHECK,),
       "BatchNorm in training mode receives a batch of one example"),
    _r("TD504", "eval-forward-nondeterministic", E, (CHECK,),
       "The model in eval mode gives different outputs for the same input"),
    _r("TD505", "momentum-passed-as-eps", W, (LINT,),
       "A BatchNorm/InstanceNorm gets a momentum-like value as its positional eps"),
    _r("TD506", "functional-dropout-ignores-training", E, (LINT, RUN),
       "F.dropout in a module without training=self.training stays on in eval mode"),
    _r("TD507", "frozen-module-still-updating", W, (RUN,),
       "A part of the model meant frozen still changes: an optimizer steps it, or its "
       "BatchNorm statistics keep updating"),
    _r("TD508", "eval-output-depends-on-batch", E, (CHECK,),
       "In eval mode an example's output depends on the other examples of its batch"),
    # 6xx: optimizer, schedules and AMP
    _r("TD601", "parameters-missing-from-optimizer", E, (CHECK, RUN),
       "Trainable parameters are not in the optimizer"),
    _r("TD602", "frozen-parameters-in-optimizer", INFO, (CHECK,),
       "Parameters with requires_grad=False are in the optimizer"),
    _r("TD603", "duplicate-parameters-in-optimizer", E, (LINT, CHECK),
       "The same parameter appears more than once in the optimizer"),
    _r("TD604", "learning-rate-out-of-range", W, (CHECK,),
       "The learning rate is zero or far outside the usual range for the optimizer"),
    _r("TD605", "cannot-overfit-batch", E, (CHECK,),
       "A few steps on one batch do not lower the loss"),
    _r("TD606", "update-ratio-out-of-band", W, (CHECK, RUN),
       "Parameter updates are far too large or too small relative to the weights"),
    _r("TD607", "scheduler-before-optimizer", W, (LINT, RUN),
       "lr_scheduler.step() runs before optimizer.step()"),
    _r("TD608", "clip-before-unscale", E, (LINT, RUN),
       "Gradients are clipped while still scaled by GradScaler"),
    _r("TD609", "step-bypasses-grad-scaler", E, (LINT,),
       "optimizer.step() is called directly while a GradScaler scales the loss"),
    _r("TD610", "layer-replaced-after-optimizer", E, (LINT,),
       "A layer is replaced on the model after the optimizer was built"),
    _r("TD611", "deprecated-cuda-amp", INFO, (LINT,),
       "torch.cuda.amp entry points are deprecated"),
    _r("TD612", "loss-not-decreasing", W, (RUN,),
       "The loss has not decreased over a window of steps"),
    _r("TD613", "loss-diverging", E, (RUN,),
       "The loss grows steadily"),
    _r("TD614", "loss-constant", E, (RUN,),
       "The loss is exactly constant from step to step"),
    _r("TD615", "epoch-scheduler-stepped-per-batch", W, (LINT, RUN),
       "An epoch-based LR scheduler is stepped every batch"),
    _r("TD616", "clip-after-step", E, (LINT, RUN),
       "Gradients are clipped after optimizer.step(), when they were already applied"),
    _r("TD617", "parameter-generator-exhausted", E, (LINT, RUN),
       "A parameters() generator is stored once and consumed twice; the second user sees "
       "nothing"),
    _r("TD618", "accumulated-loss-not-scaled", W, (LINT, RUN),
       "Gradient accumulation sums k losses without dividing by k"),
    _r("TD619", "warmup-never-ends", W, (RUN,),
       "A learning-rate warm-up is still rising when training ends"),
    _r("TD620", "optimizer-holds-stale-parameters", E, (CHECK, RUN),
       "The optimizer steps copies of the model's parameters; the model never changes"),
    _r("TD621", "update-not-representable", W, (RUN,),
       "Low-precision parameters without a float32 copy: updates round away, or eps is 0"),
    _r("TD622", "accumulated-token-means-misweighted", W, (RUN,),
       "Accumulated micro-batches each average their own tokens: tokens weigh unequally"),
    _r("TD623", "model-copy-not-following", W, (RUN,),
       "A copy of the trained model meant to follow it (EMA, target network) never changes, "
       "or drifts away from it"),
    _r("TD624", "model-copy-trained-by-optimizer", W, (RUN,),
       "An optimizer trains a copy meant to follow the model (a target/EMA network in its "
       "param_groups)"),
    _r("TD625", "scheduler-rebuilt-in-loop", W, (LINT,),
       "An LR scheduler is built anew on every pass of the training loop: the schedule restarts"),
    _r("TD626", "scheduler-stepped-in-evaluation", W, (LINT,),
       "A function that steps the LR scheduler is also called for validation or test"),
    _r("TD627", "grad-scaler-rebuilt-in-loop", W, (LINT,),
       "A GradScaler is built anew on every training step: its loss scale never backs off"),
    # 7xx: memory and performance
    _r("TD701", "figures-never-closed", W, (LINT,),
       "matplotlib figures are created in a loop and never closed"),
    _r("TD702", "empty-cache-in-loop", W, (LINT,),
       "torch.cuda.empty_cache() is called inside the training loop"),
    _r("TD703", "host-sync-in-hot-loop", INFO, (LINT,),
       "A host-device synchronisation (.item(), .cpu(), print(tensor)) runs every iteration"),
    _r("TD704", "compile-in-loop", E, (LINT,),
       "torch.compile is called inside a loop"),
    _r("TD705", "cudnn-benchmark-with-deterministic", W, (LINT, ENV),
       "cudnn.benchmark=True together with cudnn.deterministic=True"),
    _r("TD706", "memory-growth", W, (RUN,),
       "Memory grows steadily from step to step"),
    _r("TD707", "compile-graph-breaks", W, (RUN,),
       "torch.compile splits the model at graph breaks"),
    _r("TD708", "compile-recompilations", W, (RUN,),
       "torch.compile recompiles the model repeatedly"),
    _r("TD709", "out-of-memory", E, (RUN,),
       "The run died of an out-of-memory error"),
    _r("TD712", "batch-does-not-fit", W, (CHECK,),
       "A training step at the forecast batch size needs more memory than the device has"),
    # 8xx: distributed
    _r("TD801", "sampler-epoch-never-set", E, (LINT, RUN),
       "DistributedSampler.set_epoch() is never called, so every epoch has the same order"),
    _r("TD802", "shuffle-with-sampler", E, (LINT,),
       "DataLoader gets both shuffle=True and a sampler"),
    _r("TD803", "find-unused-parameters-cost", INFO, (LINT, RUN),
       "DDP(find_unused_parameters=True) walks the graph every step"),
    _r("TD804", "checkpoint-saved-on-every-rank", W, (LINT, RUN),
       "Every rank writes the same checkpoint"),
    _r("TD805", "ddp-prefixed-state-dict", W, (LINT, CKPT),
       "The DDP wrapper's state_dict is saved, so keys start with 'module.'"),
    _r("TD806", "loader-without-distributed-sampler", E, (LINT, RUN),
       "A DDP training script's DataLoader has no DistributedSampler: every rank sees the "
       "same data"),
    _r("TD807", "forward-bypasses-ddp-wrapper", E, (LINT,),
       "The model is called around its DDP wrapper, so gradients are not synchronised"),
    _r("TD808", "parameters-cast-after-ddp-wrap", E, (LINT,),
       "The model's parameters are cast after the DDP wrap"),
    _r("TD810", "replicas-diverged", E, (RUN,),
       "Tensors meant replicated (a DDP model, or stepped beside it) differ across ranks"),
    _r("TD811", "gradients-not-synchronised", E, (RUN,),
       "After backward, a DDP model's gradients differ across ranks"),
    _r("TD812", "uneven-batches-across-ranks", E, (RUN,),
       "Ranks iterate different numbers of batches, so the job hangs at the last collective"),
    _r("TD813", "rank-stopped-progressing", E, (RUN,),
       "One rank stopped making progress while the others wait for it in a collective"),
    _r("TD814", "clip-norm-from-local-shard", W, (LINT, RUN),
       "torch.nn.utils.clip_grad_norm_ on an FSDP model clips each rank by its own shard's norm"),
    _r("TD815", "local-loss-logged-as-global", INFO, (LINT,),
       "Rank 0 logs its own batch's loss as the training loss, without averaging over ranks"),
    # 9xx: checkpoints and reproducibility
    _r("TD901", "load-without-map-location", W, (LINT, CKPT),
       "A checkpoint holding CUDA tensors is loaded without map_location"),
    _r("TD902", "unsafe-checkpoint-load", E, (LINT, CKPT),
       "A checkpoint is unpickled without weights_only=True, which can run arbitrary code"),
    _r("TD903", "whole-module-saved", W, (LINT, CKPT),
       "torch.save(model) pickles the whole module instead of its state_dict"),
    _r("TD904", "strict-false-result-ignored", W, (LINT, RUN),
       "load_state_dict(strict=False) result is ignored, so keys that do not fit pass "
       "silently"),
    _r("TD905", "incomplete-resume-checkpoint", W, (LINT, CKPT),
       "A resume checkpoint holds the model but not the optimizer, scheduler or epoch"),
    _r("TD906", "never-seeded", INFO, (LINT,),
       "The training script never seeds its random number generators"),
    _r("TD907", "nondeterministic-step", W, (CHECK,),
       "Two identically seeded training steps give different losses"),
    _r("TD908", "state-outside-state-dict", W, (CHECK,),
       "Model state is lost in a state_dict save/load round trip"),
    _r("TD909", "compiled-prefix-in-keys", W, (CKPT,),
       "Checkpoint keys carry the '_orig_mod.' prefix of a torch.compile wrapper"),
    _r("TD910", "checkpoint-model-mismatch", E, (CKPT,),
       "Checkpoint keys or shapes do not match the model"),
    _r("TD911", "non-finite-in-checkpoint", E, (CKPT,),
       "The checkpoint holds NaN or Inf values"),
    _r("TD912", "state-dict-snapshot-aliased", E, (LINT, RUN),
       "A state_dict() kept as the best weights shares the live tensors, so later steps "
       "change it"),
    _r("TD913", "argparse-type-bool", W, (LINT,),
       "A command-line flag declared with type=bool: any text, \"False\" included, is true"),
)
# fmt: on

RULES: Mapping[str, Rule] = {rule.code: rule for rule in _TABLE}


# The rules of users' own detectors (TDX codes), declared when the detectors are handed
# to watch() or check(); never part of RULES, the built-in catalogue.
_CUSTOM: dict[str, Rule] = {}


def register_custom_rule(rule: Rule) -> None:
    """Make a user's rule (a ``TDX`` code, see :mod:`torchdoctor.custom`) known to
    :func:`get_rule` and :func:`finding`.

    Raises:
        UsageError: the code is already declared with another name, severity or summary.
    """
    known = _CUSTOM.get(rule.code)
    if known is None:
        _CUSTOM[rule.code] = rule
        return
    if (known.name, known.severity, known.summary) != (rule.name, rule.severity, rule.summary):
        raise UsageError(
            f"custom rule {rule.code} is declared twice, differently: "
            f"{known.name!r} and {rule.name!r}"
        )
    _CUSTOM[rule.code] = Rule(
        known.code, known.name, known.severity, known.depths | rule.depths, known.summary
    )


def get_rule(code: str) -> Rule:
    """Return the rule for ``code`` (case-insensitive), or raise :class:`UnknownRuleError`.

    Users' own rules (``TDX`` codes) are found once declared (:func:`register_custom_rule`).
    """
    try:
        return RULES[code.upper()]
    except KeyError:
        custom = _CUSTOM.get(code.upper())
        if custom is not None:
            return custom
        raise UnknownRuleError(
            f"unknown rule code {code!r}; `torchdoctor rules` lists them"
        ) from None


def finding(
    code: str,
    message: str,
    location: Location,
    depth: Depth,
    *,
    fix_hint: str = "",
    evidence: Mapping[str, Any] | None = None,
    severity: Severity | None = None,
    confidence: Confidence = Confidence.HIGH,
    fix: Fix | None = None,
) -> Finding:
    """Build a :class:`Finding` for a catalogued rule, with the rule's default severity.

    Raises:
        UnknownRuleError: ``code`` is not catalogued (a detector bug, caught by tests).
    """
    rule = get_rule(code)
    return Finding(
        code=rule.code,
        message=message,
        location=location,
        severity=severity or rule.severity,
        depth=depth,
        fix_hint=fix_hint,
        evidence=dict(evidence or {}),
        confidence=confidence,
        fix=fix,
    )
