"""Details of autograd errors: no graph, a freed graph, a saved tensor changed in place."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from torchdoctor.runtime.exceptions.facts import Detail, ErrorFacts

__all__ = ["freed_graph", "inplace_saved_tensor", "no_graph"]


def _models(facts: ErrorFacts) -> list[Any]:
    if facts.models:
        return list(facts.models)
    return [facts.module.module] if facts.module else []


def _count_trainable(models: Iterable[Any]) -> tuple[int, int]:
    total = trainable = 0
    for model in models:
        try:
            for parameter in model.parameters():
                total += 1
                trainable += bool(parameter.requires_grad)
        except Exception:  # noqa: BLE001 - a broken user module must not break the report
            continue
    return total, trainable


def no_graph(facts: ErrorFacts) -> Detail:
    """``element 0 of tensors does not require grad and does not have a grad_fn``."""
    loss = facts.frame_named("backward", "_engine_run_backward", "grad")
    tensor = loss.local("self") if loss is not None else None
    shape = list(getattr(tensor, "shape", [])) if tensor is not None else None
    total, trainable = _count_trainable(_models(facts))
    evidence: dict[str, Any] = {"parameters": total, "trainable_parameters": trainable}
    summary = "`backward()` was called on a tensor that no autograd graph produced"
    if shape is not None:
        summary += f" (shape {shape}, requires_grad=False)"
        evidence["tensor_shape"] = shape
    if total and not trainable:
        summary += f"; every one of the model's {total} parameters has requires_grad=False"
        fixes: tuple[str, ...] = (
            "Unfreeze the parameters you mean to train (`p.requires_grad_(True)`) before "
            "building the optimizer; a fully frozen model has nothing to backpropagate into.",
        )
    else:
        fixes = (
            "Compute the loss with grad mode on: not inside `torch.no_grad()` or "
            "`torch.inference_mode()` (check validation code that shares the loop).",
            "Build the loss from the model's outputs, not from `.item()`, `.detach()`, "
            "`.numpy()` or `torch.tensor(output)`, which all cut the graph.",
        )
    return Detail(summary, fixes, evidence)


def freed_graph(facts: ErrorFacts) -> Detail:
    """``Trying to backward through the graph a second time``."""
    summary = (
        "`backward()` reached part of a graph whose saved tensors an earlier "
        "`backward()` already freed; something computed in one iteration was reused "
        "in the next"
    )
    fixes = (
        "Detach state carried across iterations (an RNN hidden state, an EMA target, a "
        "running loss): `hidden = hidden.detach()`.",
        "Recompute inside the loop any tensor that was computed once before it from "
        "parameters (for example an embedding lookup or a normalised weight).",
        "Pass `retain_graph=True` only when you truly backpropagate twice through the "
        "same graph (it keeps the whole graph in memory).",
    )
    return Detail(summary, fixes, {})


_GRAD_FN = re.compile(r"^(?P<op>\w+?)(?:Backward\d*)?$")


def inplace_saved_tensor(facts: ErrorFacts) -> Detail:
    """``one of the variables needed for gradient computation has been modified by an inplace
    operation: [torch.FloatTensor [64, 10]], which is output 0 of ReluBackward0, ...``."""
    grad_fn = facts.group("grad_fn")
    match = _GRAD_FN.match(grad_fn) if grad_fn else None
    op = match["op"] if match else grad_fn
    shape = facts.group("shape")
    summary = "a tensor autograd saved for the backward pass was modified in place"
    if shape or op:
        summary += f": the [{shape}] output of `{op or '?'}`"
        if facts.group("version"):
            summary += (
                f" is at version {facts.group('version')}, autograd expected "
                f"{facts.group('expected')}"
            )
    suspects = _inplace_modules(_models(facts))
    evidence: dict[str, Any] = {"grad_fn": grad_fn, "shape": shape}
    fixes = [
        f"Replace the in-place operation on that tensor with its out-of-place form "
        f"(`x = x + y` for `x += y`, `x = x.{op.lower() or 'op'}()` for "
        f"`x.{op.lower() or 'op'}_()`, `torch.where` or `x.clone()` before "
        "`x[idx] = ...`)."
    ]
    if suspects:
        names = ", ".join(f"`{name}`" for name in suspects[:5])
        fixes.insert(
            0,
            f"Set `inplace=False` on {names}: modules with `inplace=True` overwrite "
            "tensors that other layers saved for backward.",
        )
        evidence["inplace_modules"] = suspects
    fixes.append(
        "Run one step under `torch.autograd.set_detect_anomaly(True)` to get the "
        "traceback of the forward operation whose input was overwritten."
    )
    return Detail(summary, tuple(fixes), evidence)


def _inplace_modules(models: Iterable[Any]) -> list[str]:
    names: list[str] = []
    for model in models:
        try:
            for name, module in model.named_modules():
                if getattr(module, "inplace", False) is True:
                    names.append(name or type(module).__name__)
        except Exception:  # noqa: BLE001 - a broken user module must not break the report
            continue
    return names
