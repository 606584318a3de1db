"""Order of ``backward()``, ``zero_grad()`` and ``step()`` in training loops.

TD201 grads-never-cleared, TD203 zero-grad-between-backward-and-step, TD204
step-before-backward. All are deferred to the end of each loop, when its events (nested
loops included) are known. TD205 (a loss kept across steps) lives in
:mod:`.graph_retention`.
"""

from __future__ import annotations

import ast

from torchdoctor.findings import Applicability, Depth, Fix, Severity
from torchdoctor.rules.detectors import detector
from torchdoctor.static import torchapi
from torchdoctor.static.analysis.calls import last_name
from torchdoctor.static.analysis.loops import guard_between, names_bound_in, step_functions
from torchdoctor.static.analysis.optimized import covers, optimizer_roots
from torchdoctor.static.analysis.repeats import measures_a_repeated_step
from torchdoctor.static.branches import innermost_branch
from torchdoctor.static.context import FileContext
from torchdoctor.static.frameworks import framework_owned
from torchdoctor.static.rules.base import LintRule
from torchdoctor.static.structure import Frame, FunctionScope, Item, Loop
from torchdoctor.static.training import (
    Event,
    EventKind,
    function_events,
    loop_events,
    receiver_text,
)

_JUMPS = (ast.Return, ast.Continue, ast.Break, ast.Raise)
# Words of a call that computes gradients (`unrolled_backward`, `compute_grads`).
_GRADIENT_WORDS = frozenset({"backward", "grad", "grads", "gradient", "gradients"})
_NOT_COMPUTING = frozenset({"zero", "clear", "reset", "clip", "requires", "enabled", "no"})
_CLEARING_WORDS = ("zero_grad", "clear_grad", "reset_grad", "zero_gradients")


def _steps(ctx: FileContext, loop: Loop, events: list[Event]) -> list[Event]:
    """Optimizer steps of the loop itself, without LBFGS-style closures."""
    out = []
    for event in events:
        if event.kind is not EventKind.OPTIMIZER_STEP or not loop.is_direct(event.item):
            continue
        call = event.node
        via_scaler = (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and ctx.is_in_family(call.func.value, torchapi.GRAD_SCALER, loop.function)
        )
        if isinstance(call, ast.Call) and (call.args[1:] if via_scaler else call.args):
            continue  # step(closure): the closure runs backward and zero_grad itself
        out.append(event)
    return out


def _on_one_pass(loop: Loop, item: Item) -> bool:
    """Whether ``item`` runs on one pass of ``loop`` at most: inside ``if i == 0:`` (the
    body, not the ``else``) where ``i`` counts the passes, as the target of
    ``for i in range(...)`` or the index of ``enumerate(...)``, and is not reassigned."""
    node = loop.node
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return False
    func, target = node.iter.func, node.target
    if isinstance(func, ast.Name) and func.id == "range" and isinstance(target, ast.Name):
        counter = target.id
    elif (
        isinstance(func, ast.Name)
        and func.id == "enumerate"
        and isinstance(target, ast.Tuple)
        and len(target.elts) == 2
        and isinstance(target.elts[0], ast.Name)
    ):
        counter = target.elts[0].id
    else:
        return False
    reassigned = any(counter in names_bound_in(statement) for statement in node.body)

    def tests_one_pass(test: ast.If, in_body: bool) -> bool:
        compare = test.test
        if not (
            in_body
            and isinstance(compare, ast.Compare)
            and len(compare.ops) == 1
            and isinstance(compare.ops[0], ast.Eq)
        ):
            return False
        sides = {type(compare.left), type(compare.comparators[0])}
        names = {getattr(compare.left, "id", None), getattr(compare.comparators[0], "id", None)}
        return sides == {ast.Name, ast.Constant} and counter in names

    return not reassigned and guard_between(item.frames, loop.frame, tests_one_pass) is not None


@detector("TD201", depth=Depth.LINT)
class GradsNeverCleared(LintRule):
    """A loop that steps an optimizer after ``backward()`` and never clears gradients."""

    requires = ("backward",)

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        if framework_owned(ctx, loop.function):
            return  # the framework clears and steps around this code
        events = loop_events(ctx, loop, forwards=False)
        self._check_closures(loop, events)
        steps = _steps(ctx, loop, events)
        if not steps:
            self._check_helpers(loop, events)
            return
        if not any(e.kind is EventKind.BACKWARD for e in events):
            return
        if any(e.kind is EventKind.ZERO_GRAD for e in events) or self._clears_elsewhere(loop):
            return
        if all(_on_one_pass(loop, e.item) for e in steps):
            return  # `if i == 0:` around the step: nothing is left over for a second one
        step = steps[0]
        name = receiver_text(ctx, step.target)
        # A benchmark repeating one step on the same tensors to time it: true, but the
        # weights it trains are never used.
        measured = measures_a_repeated_step(ctx, loop)
        self.report(
            step.node,
            f"`{ctx.segment(step.node)}` at line {step.line} runs with no `zero_grad()` in "
            f"the loop that starts at line {loop.line}: backward() adds into `.grad`, so "
            "every step applies the sum of all gradients so far"
            + (
                "; the loop repeats one step on the same inputs while the function measures "
                "time or memory, so nothing it reports depends on the updates"
                if measured
                else ""
            ),
            severity=Severity.INFO if measured else None,
            fix_hint=f"Call `{name}.zero_grad()` at the top of the loop body (or right after "
            "the step).",
            confidence=step.confidence,
            fix=self._fix(loop, name),
            evidence={"loop_line": loop.line},
        )

    def _check_closures(self, loop: Loop, events: list[Event]) -> None:
        """``optimizer.step(closure)`` whose closure (a function of this file) runs
        ``backward()`` and never clears gradients. L-BFGS calls the closure several times
        per step, so the closure itself must clear them (PyTorch's contract for closures);
        any other optimizer calls it once, so clearing in the loop is enough there."""
        ctx = self.ctx
        for event in events:
            call = event.node
            if (
                event.kind is not EventKind.OPTIMIZER_STEP
                or not loop.is_direct(event.item)
                or not isinstance(call, ast.Call)
                or len(call.args) != 1
                or not isinstance(call.args[0], ast.Name)
            ):
                continue
            closure = ctx.function_index.get(call.args[0].id)
            if closure is None or closure is loop.function:
                continue
            inside = function_events(ctx, closure, forwards=False)
            if not any(e.kind is EventKind.BACKWARD for e in inside) or any(
                e.kind is EventKind.ZERO_GRAD for e in inside
            ):
                continue
            if self._clears_in(closure.items, closure):
                continue
            optimizer = (
                ctx.instance_type(call.func.value, loop.function)
                if isinstance(call.func, ast.Attribute)
                else None
            )
            iterates = optimizer == "torch.optim.LBFGS"
            if not iterates and (
                any(e.kind is EventKind.ZERO_GRAD for e in events) or self._clears_elsewhere(loop)
            ):
                continue
            self._report_closure(call, closure, loop, iterates)
            return

    def _report_closure(
        self, call: ast.Call, closure: FunctionScope, loop: Loop, iterates: bool
    ) -> None:
        ctx = self.ctx
        name = receiver_text(ctx, call.func.value) if isinstance(call.func, ast.Attribute) else ""
        why = (
            "L-BFGS calls the closure several times in one step, so without clearing in the "
            "closure each evaluation's gradients add to the last ones and the line search "
            "works on a wrong, growing gradient"
            if iterates
            else "backward() adds into `.grad`, so every step applies the sum of all "
            "gradients so far"
        )
        self.report(
            call,
            f"`{ctx.segment(call)}` at line {call.lineno} (loop at line {loop.line}) hands "
            f"the optimizer `{closure.name}()`, which runs backward() and never clears the "
            f"gradients: {why}",
            fix_hint=f"Call `{name or 'optimizer'}.zero_grad()` at the top of "
            f"`{closure.name}()`, before its forward.",
            evidence={"loop_line": loop.line, "closure_line": closure.node.lineno},
        )

    def _check_helpers(self, loop: Loop, events: list[Event]) -> None:
        """The loop body split into functions of this file: a helper called straight from
        the loop runs one optimizer step per call (``train_step(...)``, ``self._update()``),
        a backward runs in the loop or in its helpers, and nothing clears gradients."""
        ctx = self.ctx
        called: list[tuple[Item, FunctionScope]] = []
        for item in loop.items:
            if isinstance(item.node, ast.Call) and loop.is_direct(item):
                callee = ctx.resolve_local_call(item.node, loop.function)
                if callee is not None and callee is not loop.function:
                    called.append((item, callee))
        steppers = step_functions(ctx)
        stepping = [(item, callee) for item, callee in called if callee in steppers]
        if not stepping:
            return
        helper_events = [
            e for _, callee in called for e in function_events(ctx, callee, forwards=False)
        ]
        everything = events + helper_events
        if (
            not any(e.kind is EventKind.BACKWARD for e in everything)
            or any(e.kind is EventKind.ZERO_GRAD for e in everything)
            or self._clears_elsewhere(loop)
        ):
            return
        found = next(
            (
                (item, callee, e)
                for item, callee in stepping
                for e in function_events(ctx, callee, forwards=False)
                if e.kind is EventKind.OPTIMIZER_STEP
            ),
            None,
        )
        if found is None:
            return
        item, callee, step = found
        if isinstance(step.node, ast.Call) and step.node.args:
            return  # step(closure): the closure clears and backpropagates itself
        self.report(
            item.node,
            f"`{ctx.segment(item.node.func)}(...)` at line {item.line} runs "  # type: ignore[attr-defined]
            f"`{ctx.segment(step.node)}` (line {step.line}, in `{callee.name}()`) once per "
            f"iteration of the loop at line {loop.line}, and neither the loop nor the "
            "functions it calls clear the gradients: backward() adds into `.grad`, so every "
            "step applies the sum of all gradients so far",
            fix_hint=f"Call `{receiver_text(ctx, step.target)}.zero_grad()` in "
            f"`{callee.name}()` before its backward (or after its step).",
            confidence=step.confidence,
            evidence={"loop_line": loop.line, "step_line": step.line},
        )

    def _clears_elsewhere(self, loop: Loop) -> bool:
        """Whether a call in the loop clears gradients out of sight: a method named like
        ``zero_grad``, or a function of this file that does (followed three calls deep)."""
        return self._clears_in(loop.items, loop.function)

    def _clears_in(self, items: list[Item], function: FunctionScope | None) -> bool:
        """Whether a call among ``items`` clears gradients out of sight (see
        :meth:`_clears_elsewhere`)."""
        pending = [(item, function, 0) for item in items]
        seen: set[int] = set()
        while pending:
            item, scope, depth = pending.pop()
            node = item.node
            if not isinstance(node, ast.Call):
                continue
            name = last_name(node.func)
            if any(word in name.lower() for word in _CLEARING_WORDS):
                return True
            callee = self.ctx.resolve_local_call(node, scope)
            if callee is None or id(callee) in seen or depth >= 3:
                continue
            seen.add(id(callee))
            if any(
                e.kind is EventKind.ZERO_GRAD
                for e in function_events(self.ctx, callee, forwards=False)
            ):
                return True
            pending.extend((sub, callee, depth + 1) for sub in callee.items)
        return False

    def _fix(self, loop: Loop, name: str) -> Fix | None:
        body = loop.node.body
        if not body or body[0].lineno == loop.node.lineno:
            return None
        edit = self.ctx.insert_before_statement(body[0], f"{name}.zero_grad()")
        return Fix(
            f"Call `{name}.zero_grad()` at the top of the loop", (edit,), Applicability.UNSAFE
        )


# Methods of a model that run none of its layers.
_HOUSEKEEPING = frozenset(
    {"zero_grad", "train", "eval", "parameters", "named_parameters", "state_dict", "to", "cuda"}
)


@detector("TD203", depth=Depth.LINT)
class ZeroGradBetweenBackwardAndStep(LintRule):
    """``zero_grad()`` after ``backward()`` and before the ``step()`` that needs the grads."""

    requires = ("zero_grad",)

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        if framework_owned(ctx, loop.function):
            return
        events = loop_events(ctx, loop, forwards=False)
        steps = _steps(ctx, loop, events)
        if not steps:
            return
        optimizers = {receiver_text(ctx, s.target) for s in steps}
        for index, event in enumerate(events):
            if not self._clearing_call(event) or not loop.is_direct(event.item):
                continue
            backward = next(
                (e for e in reversed(events[:index]) if e.kind is EventKind.BACKWARD), None
            )
            step = self._next_step(events, index, steps)
            if backward is None or step is None:
                continue
            if self._applies(loop, event, step, optimizers):
                self._report(loop, event, backward, step)
                return

    @staticmethod
    def _clearing_call(event: Event) -> bool:
        return (
            event.kind is EventKind.ZERO_GRAD
            and isinstance(event.node, ast.Call)
            and isinstance(event.node.func, ast.Attribute)
            and event.node.func.attr == "zero_grad"
        )

    @staticmethod
    def _next_step(events: list[Event], index: int, steps: list[Event]) -> Event | None:
        for event in events[index + 1 :]:
            if event.kind is EventKind.BACKWARD or _refills(event):
                return None  # gradients are written again before the step
            if event in steps:
                return event
        return None

    def _applies(self, loop: Loop, zero: Event, step: Event, optimizers: set[str]) -> bool:
        zero_frames, step_frames = loop.inner_frames(zero.item), loop.inner_frames(step.item)
        if step_frames[: len(zero_frames)] != zero_frames:
            return False  # zero_grad() is in a branch the step is not in
        if any(
            isinstance(item.node, _JUMPS) and zero.line <= item.line <= step.line
            for item in loop.items
        ):
            return False  # `zero_grad(); continue`: the step is skipped
        if _leaving_branch(zero_frames):
            return False  # imaginaire: an exploding norm zeroes, steps nothing and breaks
        target = receiver_text(self.ctx, zero.target, "")
        if target == receiver_text(self.ctx, step.target):
            return True
        if zero.target is None:
            return False
        if not self._clears_all_it_steps(loop, zero.target, step) and (
            self._a_part_of_a_model_run_here(loop, zero.target)
        ):
            return False
        return len(optimizers) == 1 and self.ctx.is_in_family(
            zero.target, torchapi.MODULE, loop.function
        )

    def _clears_all_it_steps(self, loop: Loop, target: ast.expr, step: Event) -> bool:
        """The stepped optimizer is built in this function from the parameters of the
        cleared module or of its parts only (``SGD(model.head.parameters())``)."""
        if not isinstance(step.target, ast.Name):
            return False
        binding = self.ctx.binding(step.target, loop.function)
        if binding is None or binding.value is None:
            return False
        roots = optimizer_roots(self.ctx, binding.value, loop.function)
        path = "".join(self.ctx.segment(target).split())
        return bool(roots) and all(r == path or r.startswith(path + ".") for r in roots)

    def _a_part_of_a_model_run_here(self, loop: Loop, target: ast.expr) -> bool:
        """``model.generator.zero_grad()`` where the loop runs ``model`` itself, or
        another of its parts (``model.base``): one part is cleared and the others keep
        their gradients for the step (TranAD's GAN with one optimizer: the
        discriminator's step after clearing the generator's; FedPAC's feature extractor
        trained with its classifier held)."""
        path = "".join(self.ctx.segment(target).split())
        parent, dot, _ = path.rpartition(".")
        if not dot or parent == "self":
            return False
        for event in loop_events(self.ctx, loop):
            if event.kind is not EventKind.FORWARD or event.target is None:
                continue
            run = "".join(self.ctx.segment(event.target).split())
            if run == parent or (run.startswith(parent + ".") and not covers(run, path)):
                return True
        # a method of the parent that runs its other parts (`model.get_last_features(x)`)
        part = path.rpartition(".")[2]
        return any(
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr not in (part, *_HOUSEKEEPING)
            and "".join(self.ctx.segment(node.func.value).split()) == parent
            for item in loop.items
            for node in ast.walk(item.node)
        )

    def _report(self, loop: Loop, zero: Event, backward: Event, step: Event) -> None:
        ctx = self.ctx
        text = ctx.segment(zero.node)
        self.report(
            zero.node,
            f"`{text}` at line {zero.line} runs after `{ctx.segment(backward.node)}` (line "
            f"{backward.line}) and before `{ctx.segment(step.node)}` (line {step.line}): "
            "the step sees zeroed gradients, so the model never learns",
            fix_hint=f"Move `{text}` to the top of the loop body, before the forward pass "
            "and `backward()`.",
            fix=self._fix(loop, zero, text),
            evidence={"backward_line": backward.line, "step_line": step.line},
        )

    def _fix(self, loop: Loop, zero: Event, text: str) -> Fix | None:
        body = loop.node.body
        if loop.inner_frames(zero.item) or not body or body[0].lineno == loop.node.lineno:
            return None
        delete = self.ctx.delete_statement(zero.node)
        if delete is None or body[0].lineno == zero.line:
            return None
        insert = self.ctx.insert_before_statement(body[0], text)
        return Fix(f"Move `{text}` to the top of the loop", (insert, delete), Applicability.UNSAFE)


def _leaving_branch(frames: tuple[Frame, ...]) -> bool:
    """The innermost ``if`` branch of ``frames`` ends with ``break``, ``continue``,
    ``return`` or ``raise``: a skip path (clear the gradients, step with none, leave), not
    the loop's update, which runs on the other path."""
    block = innermost_branch(frames)
    return block is not None and len(block) > 0 and isinstance(block[-1], _JUMPS)


@detector("TD204", depth=Depth.LINT)
class StepBeforeBackward(LintRule):
    """An unconditional ``step()`` that comes before the iteration's ``backward()``."""

    requires = ("backward",)

    def leave_loop(self, loop: Loop) -> None:
        ctx = self.ctx
        if framework_owned(ctx, loop.function):
            return
        events = loop_events(ctx, loop, forwards=False)
        for step in _steps(ctx, loop, events):
            if not loop.is_unconditional(step.item):
                continue  # `if i > 0 and i % k == 0: step()` at the top: accumulation
            position = events.index(step)
            if any(e.kind is EventKind.BACKWARD for e in events[:position]):
                continue
            backward = next(
                (e for e in events[position + 1 :] if e.kind is EventKind.BACKWARD), None
            )
            if backward is None or self._filled_by_a_call(loop, events, position):
                continue
            self.report(
                step.node,
                f"`{ctx.segment(step.node)}` at line {step.line} runs before "
                f"`{ctx.segment(backward.node)}` (line {backward.line}) in the loop that "
                f"starts at line {loop.line}: each step applies the previous batch's "
                "gradients, or none at all when they were just cleared",
                fix_hint="Call `backward()` first, then `step()`: forward, loss, "
                "`loss.backward()`, `optimizer.step()`.",
                confidence=step.confidence,
                evidence={"backward_line": backward.line},
            )
            return

    def _filled_by_a_call(self, loop: Loop, events: list[Event], position: int) -> bool:
        """``alpha_optim.zero_grad(); architect.unrolled_backward(...); alpha_optim.step()``
        (DARTS): the step's own optimizer is cleared earlier in the iteration and a call
        named for gradients (``backward``, ``grad``) runs between the two, in code lint
        does not read. A step right after its clearing would do nothing: that call is
        what fills the gradients this step applies."""
        ctx = self.ctx
        step = events[position]
        stepped = ctx.segment(step.target) if step.target is not None else None
        cleared = next(
            (
                e
                for e in reversed(events[:position])
                if e.kind is EventKind.ZERO_GRAD
                and e.target is not None
                and ctx.segment(e.target) == stepped
            ),
            None,
        )
        if cleared is None:
            return False
        return any(
            isinstance(item.node, ast.Call)
            and cleared.line < item.line < step.line
            and _names_gradients(last_name(item.node.func) or "")
            for item in loop.items
            if item.node is not cleared.node
        )


def _names_gradients(name: str) -> bool:
    """A call named for computing gradients (``unrolled_backward``, ``compute_grads``),
    not for clearing, clipping or switching them (``zero_grad`` of another optimizer,
    ``clip_grad_norm_``, ``requires_grad_``, ``set_grad_enabled``)."""
    words = set(torchapi.name_tokens(name))
    return bool(words & _GRADIENT_WORDS) and not words & _NOT_COMPUTING


def _refills(event: Event) -> bool:
    """``p.grad = g``: gradients set by hand (gradient surgery, PCGrad), not cleared."""
    node = event.node
    return (
        event.kind is EventKind.ZERO_GRAD
        and isinstance(node, (ast.Assign, ast.AnnAssign))
        and node.value is not None
        and not (isinstance(node.value, ast.Constant) and node.value.value is None)
    )
