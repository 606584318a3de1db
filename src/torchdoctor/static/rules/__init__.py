"""Lint rules, one module per topic. Importing this package registers all of them.

Writing a lint rule
===================

A rule is a :class:`~torchdoctor.static.rules.base.LintRule` subclass in
``static/rules/<topic>.py``, registered with ``@detector(code, depth=Depth.LINT)``. Its
module is imported by name at the bottom of this file (one line per topic). This folder
holds rules only: a rule module imports :mod:`torchdoctor.static.analysis` (what rules
share), :mod:`torchdoctor.static.torchapi` (the one table of torch facts) and ``base``,
never another rule module (``tests/unit/static/test_rule_modules.py`` holds this); a
helper two rules need goes into ``static/analysis/`` under a public name, and a list of
torch names goes into ``torchapi``. The engine makes one instance per file and calls its
hooks during the file's single traversal::

    import ast

    from torchdoctor.findings import Applicability, Depth, Fix
    from torchdoctor.rules.detectors import detector
    from torchdoctor.static import torchapi
    from torchdoctor.static.rules.base import LintRule
    from torchdoctor.static.structure import Loop
    from torchdoctor.static.training import EventKind, loop_events


    @detector("TD206", depth=Depth.LINT)
    class ForwardCalledDirectly(LintRule):
        requires = ("forward",)            # skip files that never say "forward"
        call_names = frozenset({"forward"})  # visit_call sees only `<x>.forward(...)`

        def visit_call(self, node: ast.Call) -> None:
            receiver = node.func.value
            if not self.ctx.is_in_family(receiver, torchapi.MODULE):
                return
            name = self.ctx.segment(receiver)
            fix = Fix(f"Call `{name}(...)`", (self.ctx.replace(node.func, name),),
                      Applicability.UNSAFE)
            self.report(node, f"`{name}.forward()` skips the module's hooks",
                        fix_hint=f"Call `{name}(...)` instead.", fix=fix)


    @detector("TD699", depth=Depth.LINT)  # (an illustration: a loop-order rule)
    class StepWithoutBackward(LintRule):
        requires = ("step",)

        def leave_loop(self, loop: Loop) -> None:        # deferred: the loop is complete
            events = loop_events(self.ctx, loop)
            kinds = {event.kind for event in events}
            ...

Hooks (define only the ones you need; the dispatch table is built once per process):

* ``visit_<NodeClass>(node)``: every node of that ``ast`` class (``visit_Assign``,
  ``visit_With``...), in source order. ``self.ctx.function`` is the enclosing function.
* ``visit_call(node)`` with ``call_names``: calls whose callee's last name is listed; use
  it instead of ``visit_Call`` whenever you can (it is much cheaper on big files).
* ``leave_loop(loop)``, ``leave_function(function)``, ``leave_class(cls)``,
  ``leave_module(module)``: deferred checks. The first three run once the whole file is
  recorded (in the order the scopes end, with ``self.ctx.function`` and ``frames`` as they
  were there), so a loop's check can read a method or helper defined further down; a
  ``visit_*`` handler sees only what the walk has reached. See
  :mod:`torchdoctor.static.structure` for :class:`Loop` (``items`` in source order, with
  their ``frames``; ``is_direct``, ``is_unconditional``), :class:`FunctionScope`,
  :class:`ModuleScope` (every function, class and loop of the file).

Asking questions (``self.ctx``, a :class:`~torchdoctor.static.context.FileContext`):

* ``qualified_name(expr)``: ``"torch.nn.CrossEntropyLoss"`` for ``nn.CrossEntropyLoss``
  whatever the import spelling; ``is_call_to(call, "torch.load", ...)``.
* ``binding(name)``: what a name was bound to earlier in its function/module;
  ``attribute_binding(self_attr)`` for ``self.x`` set in any method (``__init__`` first).
* ``instance_type(expr)``: the class a value was built from, through bindings and
  ``.to()``/``.cuda()`` chains; ``family_of(expr)`` / ``is_in_family(expr, family)`` with
  the families of :mod:`torchdoctor.static.torchapi` (``MODULE``, ``OPTIMIZER``,
  ``SCHEDULER``, ``GRAD_SCALER``, ``DATALOADER``, ``SAMPLER``, ``LOSS``), falling back to
  the variable's name (``optimizer``, ``sched``) with ``Confidence.MEDIUM``.
* :mod:`torchdoctor.static.training`: ``loop_events(ctx, loop)`` (ordered ``backward``,
  optimizer step, ``zero_grad``, scheduler step, ``eval``/``train``, forward),
  ``is_accumulation_guard(if_test)``; :mod:`torchdoctor.static.grad_mode`:
  ``grad_disabled_by(ctx, item.frames)``. :mod:`torchdoctor.static.analysis.events` maps
  these events onto the two views that follow calls into helpers:
  :mod:`~torchdoctor.static.analysis.step_sequences` (``sequences(ctx)``: backward, step,
  ``zero_grad``, clipping, scheduler of each body) and
  :mod:`~torchdoctor.static.analysis.mode_actions` (``expand``: ``eval``/``train``,
  forwards, backwards); both follow helpers with ``helper_to_follow`` up to
  ``MAX_CALL_DEPTH`` calls deep. Pick the view that sees what your rule judges.
* ``resolve_local_call(call)``: the function of this file a call runs (``helper()``,
  ``self.helper()``); :func:`torchdoctor.static.analysis.callers.called_function` also
  resolves ``obj.method()`` on an instance of a class of the file, and
  ``passed_values`` goes from a parameter back to what callers pass;
  ``callers(function)`` the other way.
* ``ctx.project``: the :class:`~torchdoctor.static.project.ProjectIndex` of every file
  linted together (classes, bases, ``__init__`` layers, what ``forward`` ends in,
  functions); ``ctx.project_class_of(expr)`` gives the project class of a value
  (``info.has_dropout_or_batchnorm``, ``info.forward_ends_in``, ``info.is_module``).
  :func:`torchdoctor.static.frameworks.framework_owned` tells whether a function runs
  inside a framework (Lightning, HF ``Trainer``, event handlers): loop-order rules skip it.
* :mod:`torchdoctor.static.branches`: ``exclusive(ctx, a, b)`` (two places on opposite
  sides of one ``if``), ``conditional(ctx, statement, use, scope)`` (an assignment that
  may not have run); :mod:`torchdoctor.static.values`: ``constructor_of(ctx, expr,
  scope)`` (the call a value was built from).
* Torch facts, from :mod:`torchdoctor.static.torchapi` only: families and canonical
  names, ``holds_no_parameters`` (``PARAMETER_FREE_LAYERS``), the wrappers (``DDP``,
  ``DATA_PARALLEL``, ``FSDP1``, ``FSDP2``), ``DISTRIBUTED_SAMPLER``, the clipping
  functions (``CLIP_GRAD_NORM``...), the losses (``LossKind``, ``LOSS_FUNCTIONS``,
  ``LOSS_CLASSES``). A rule keeps no list of torch names of its own.
* Shared by several rules, in :mod:`torchdoctor.static.analysis` (see its docstring for
  the list): ``calls`` (keyword arguments, ``last_name``, method calls, edits that add
  arguments), ``loops`` (step loops, periodic guards, names bound in a loop),
  ``dataloader``, ``losses`` (the loss calls of a file), ``loss_inputs`` (what produced a
  loss input), ``destinations`` (where a value goes: training or a summary), ``ranks``
  (rank-zero tests), ``entries`` (``d[key] = value`` writes).

Reporting: ``self.report(node, message, fix_hint=..., evidence=..., confidence=...,
fix=...)``; a rule registered for several codes passes ``code=``. Messages name the thing
and the line ("`optimizer.step()` at line 42 runs with no `zero_grad()` in the loop that
starts at line 30"); fix hints are imperative. Fixes are
:class:`~torchdoctor.findings.Fix` objects whose edits come from node positions
(``ctx.replace(node, text)``, ``ctx.insert_before_statement(stmt, text)``,
``ctx.delete_statement(stmt)``); mark them ``Applicability.SAFE`` only when behaviour
cannot change.

Rules: never import torch or the linted code; never string-match torch names on
``node.func.attr`` (ask ``ctx``); stay quiet when unsure (a false alarm is a bug), and
write what you miss in the doc's *Known false negatives*. A rule that raises becomes one
TD001 finding for that file and is switched off; the other rules carry on.

Testing: ``tests/unit/static/helpers.py`` has ``lint_codes(source)`` returning the
``(code, line)`` pairs found, so a test is ``assert lint_codes(src, "TD206") ==
[("TD206", 7)]``; or mark the expected lines in the source (``model.forward(x)  # expect:
TD206``) and call ``assert_marked(src, "TD206")``. Write at least as many quiet cases as
flagged ones, including the tricky correct variants. The lab pair
``examples/lab/<code>-<name>/`` is linted by ``tests/lab/test_lab_lint.py`` (``# expect:``
markers give the exact lines).
"""

from __future__ import annotations

# TD002 unparsable-source is reported by the parser itself; importing it registers it.
from torchdoctor.static import source as _source  # noqa: F401

# Topic modules, imported by name (nothing is discovered by scanning). One line each.
from torchdoctor.static.rules import (
    accumulation,  # noqa: F401
    aliased_inplace,  # noqa: F401
    amp,  # noqa: F401
    argparse_flags,  # noqa: F401
    autograd,  # noqa: F401
    batches,  # noqa: F401
    checkpoint,  # noqa: F401
    cudnn,  # noqa: F401
    data,  # noqa: F401
    ddp_wrapping,  # noqa: F401
    device,  # noqa: F401
    discarded,  # noqa: F401
    distributed,  # noqa: F401
    distributed_saving,  # noqa: F401
    eval_schedules,  # noqa: F401
    float64,  # noqa: F401
    frozen_new_layer,  # noqa: F401
    gradient_order,  # noqa: F401
    graph_retention,  # noqa: F401
    label_shift,  # noqa: F401
    leaf_losses,  # noqa: F401
    loop_order,  # noqa: F401
    loss,  # noqa: F401
    loss_averaging,  # noqa: F401
    memory,  # noqa: F401
    model_outputs,  # noqa: F401
    modes,  # noqa: F401
    module_definitions,  # noqa: F401
    normalisation,  # noqa: F401
    optimizer,  # noqa: F401
    optimizer_params,  # noqa: F401
    parameter_generators,  # noqa: F401
    rank_zero_logging,  # noqa: F401
    recurrent,  # noqa: F401
    reproducibility,  # noqa: F401
    resume,  # noqa: F401
    samplers,  # noqa: F401
    scaler_rebuilt,  # noqa: F401
    scheduler_rebuilt,  # noqa: F401
    schedules,  # noqa: F401
    sharded_clipping,  # noqa: F401
    snapshots,  # noqa: F401
    speed,  # noqa: F401
    stale_graph,  # noqa: F401
    state_dicts,  # noqa: F401
    subsets,  # noqa: F401
    target_dtype,  # noqa: F401
    target_networks,  # noqa: F401
    worker_rng,  # noqa: F401
)
