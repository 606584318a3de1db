"""A schedule advanced by evaluation passes: TD626 scheduler-stepped-in-evaluation.

One function often serves both passes: ``train(epoch, loader, partition="train")`` runs
the updates, and the same function with ``partition="valid"`` (or ``train=False``,
``validate=True``, a validation loader) evaluates. A ``scheduler.step()`` it makes on
every call then advances on the evaluation calls too: an epoch schedule moves two or three
times per epoch on the epochs that evaluate, and the learning rate decays (or a cosine
cycle ends and climbs again) far earlier than planned, with nothing to see in the log.

The rule needs all of: a function of the file that trains (a ``backward()`` or an
optimizer step in it) and steps an LR scheduler with no condition around the step; a
call of it for evaluation (an argument that names validation or test, or turns training
off); and a call of it for training. A step under any ``if`` in the function (``if
partition == "train":``) is taken for guarded.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Depth
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import method_call
from torchdoctor.static.analysis.loops import local_frames
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import FrameKind, FunctionScope, Item, ModuleScope

_EVAL_WORDS = frozenset({"val", "valid", "validation", "test", "eval", "evaluation", "dev"})
_TRAINING_SWITCHES = frozenset({"train", "training", "is_train", "is_training"})
_EVALUATION_SWITCHES = frozenset(
    {"validate", "validation", "eval", "evaluate", "is_eval", "test", "is_test", "testing"}
)
_CONDITIONS = (FrameKind.IF_BODY, FrameKind.IF_ELSE, FrameKind.TRY, FrameKind.EXCEPT)


@detector("TD626", depth=Depth.LINT)
class SchedulerSteppedInEvaluation(LintRule):
    """``scheduler.step()`` in a function the file also calls for validation or test."""

    requires = ("step(",)
    needs_structure = True

    def leave_module(self, module: ModuleScope) -> None:
        ctx = self.ctx
        for function in module.functions:
            step = next((i for i in function.items if self._schedule_step(i, function)), None)
            if step is None or not self._trains(function):
                continue
            sites = [item.node for _, item in ctx.callers(function)]
            evaluation = [c for c in sites if isinstance(c, ast.Call) and _for_evaluation(c)]
            training = [c for c in sites if isinstance(c, ast.Call) and not _for_evaluation(c)]
            if evaluation and training:
                self._report(step, function, evaluation[0])

    def _schedule_step(self, item: Item, function: FunctionScope) -> bool:
        node = item.node
        if not method_call(node, "step"):
            return False
        receiver = node.func.value  # type: ignore[attr-defined]
        if not self.ctx.is_in_family(receiver, torchapi.SCHEDULER, function):
            return False
        return not any(f.kind in _CONDITIONS for f in local_frames(item.frames))

    def _trains(self, function: FunctionScope) -> bool:
        """The function runs a backward pass or an optimizer step (under any condition)."""
        return any(
            method_call(item.node, "backward")
            or (
                method_call(item.node, "step")
                and self.ctx.is_in_family(
                    item.node.func.value,  # type: ignore[attr-defined]
                    torchapi.OPTIMIZER,
                    function,
                )
            )
            for item in function.items
        )

    def _report(self, step: Item, function: FunctionScope, call: ast.Call) -> None:
        ctx = self.ctx
        text = ctx.segment(step.node)
        site = ctx.segment(call)
        if len(site) > 70 or "\n" in site:
            site = f"{ctx.segment(call.func)}(...)"
        self.report(
            step.node,
            f"`{text}` at line {step.line} runs on every call of `{function.name}()`, and "
            f"`{function.name}()` is also called for evaluation (`{site}` at line "
            f"{call.lineno}): the schedule advances on the evaluation passes too, so the "
            "learning rate moves ahead of the training it was planned for",
            fix_hint=f"Step the scheduler only on the training pass (under the same "
            f"condition as the updates), or once per epoch next to the call of "
            f"`{function.name}()` for training.",
        )


def _for_evaluation(call: ast.Call) -> bool:
    """The call's arguments name an evaluation pass: a validation or test loader or split
    (``dataloaders["valid"]``, ``partition="test"``, ``val_loader``), ``train=False``,
    or ``validate=True``."""
    for keyword in call.keywords:
        value = keyword.value
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            name = (keyword.arg or "").lower()
            if name in _TRAINING_SWITCHES and value.value is False:
                return True
            if name in _EVALUATION_SWITCHES and value.value is True:
                return True
    for argument in [*call.args, *(k.value for k in call.keywords)]:
        for node in ast.walk(argument):
            word = None
            if isinstance(node, ast.Name):
                word = node.id
            elif isinstance(node, ast.Attribute):
                word = node.attr
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                word = node.value
            if word is not None and _EVAL_WORDS & set(torchapi.name_tokens(word)):
                return True
    return False
