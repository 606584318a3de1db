"""Where an error or a warning happened: the user's own line and the model's module path.

The user's frame is the innermost frame of their own code: not torch, not torchdoctor, not
the standard library and not an installed package (one classifier for every depth:
:func:`torchdoctor._usercode.is_user_file`). The running module is found from the
``self`` of the frames in a traceback (``nn.Module.__call__`` and every ``forward`` have
one), matched against the known models' ``named_modules()`` so it can be named by its path
(``encoder.layers.3.attn``). Nothing here imports torch: it is looked up in ``sys.modules``,
where it always is once a training run has raised or warned.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

# Which files are the user's is decided in one place, for every depth; these names are
# re-exported for the runtime's modules.
from torchdoctor._usercode import (
    RUNPY_FILES,
    add_run_script,
    is_library_file,
    is_torch_file,
    is_torchdoctor_file,
    library_dirs,
    remove_run_script,
    under,
)

__all__ = [
    "RUNPY_FILES",
    "FrameRef",
    "ModuleRef",
    "add_run_script",
    "embedded_traceback_frames",
    "frames_of_stack",
    "frames_of_traceback",
    "is_library_file",
    "is_torch_file",
    "is_torchdoctor_file",
    "library_dirs",
    "remove_run_script",
    "running_module",
    "user_frame",
]

_WORKER_FRAME = re.compile(
    r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$', re.MULTILINE
)


@dataclass(frozen=True, slots=True)
class FrameRef:
    """One frame, reduced to what a finding needs.

    Attributes:
        path: the source file, as the interpreter saw it.
        line: 1-based line number.
        function: the function's name.
        frame: the live frame, when there is one (absent for frames parsed from text);
            used to read locals such as the tensors a loss function received.
    """

    path: str
    line: int
    function: str
    frame: FrameType | None = None

    @property
    def snippet(self) -> str | None:
        """The source line, stripped, or ``None`` when the file cannot be read."""
        text = linecache.getline(self.path, self.line).strip()
        return text or None

    @property
    def where(self) -> str:
        """``file:line`` with the file shortened to its name relative to the working dir."""
        return f"{_short(self.path)}:{self.line}"

    def local(self, name: str) -> Any:
        """A local variable of the live frame, or ``None``."""
        if self.frame is None:
            return None
        try:
            return self.frame.f_locals.get(name)
        except Exception:  # noqa: BLE001 - exotic frames may refuse; a missing local is fine
            return None


@dataclass(frozen=True, slots=True)
class ModuleRef:
    """The ``nn.Module`` that was running: its path in a known model and its class name.

    ``path`` is ``""`` for a model's root module and ``None`` for a module outside every
    known model (a loss module, say); ``variable`` is then the name the user's frame gives it.
    """

    module: Any
    path: str | None
    type_name: str
    variable: str | None = None

    @property
    def label(self) -> str:
        """What a message calls it: ``head``, ``the model (Net)`` or ``criterion``."""
        if self.path:
            return self.path
        if self.path == "":
            return f"the model ({self.type_name})"
        return self.variable or self.type_name

    @property
    def described(self) -> str:
        """How messages name it: ``head (Linear)``, ``the model (Net)`` or ``a Conv2d``."""
        if self.path == "":
            return f"the model (`{self.type_name}`)"
        if self.label == self.type_name:
            article = "an" if self.type_name[:1] in "AEIOU" else "a"
            return f"{article} `{self.type_name}`"
        return f"`{self.label}` ({self.type_name})"

    @property
    def object(self) -> str:
        """The value for :attr:`Location.object`."""
        return self.path or self.variable or self.type_name


def _short(path: str) -> str:
    """``path`` as the user would type it: relative to the current directory when it is
    under it, else absolute (never ``../../../drivers/train.py``)."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute)
    except ValueError:  # another drive on Windows
        return absolute
    return (
        absolute if relative == os.pardir or relative.startswith(os.pardir + os.sep) else relative
    )


def frames_of_traceback(tb: TracebackType | None) -> list[FrameRef]:
    """The frames of a traceback, outermost first (the raising frame last)."""
    frames: list[FrameRef] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append(FrameRef(code.co_filename, tb.tb_lineno, code.co_name, tb.tb_frame))
        tb = tb.tb_next
    return frames


def user_frame(frames: Sequence[FrameRef], roots: Sequence[str] = ()) -> FrameRef | None:
    """The innermost frame of the user's code among ``frames`` (outermost first).

    With ``roots`` (the directories of the user's script), a frame under a root wins over
    other non-library frames, so code of a second project on ``sys.path`` is skipped.
    """
    # Whatever called runpy (`torchdoctor run`, click, an entry point) launched the user's
    # code and is never part of it.
    launchers = [i for i, f in enumerate(frames) if f.path in RUNPY_FILES]
    if launchers:
        frames = frames[launchers[-1] + 1 :]
    candidates = [f for f in frames if not is_library_file(f.path)]
    if roots:
        preferred = [f for f in candidates if under(f.path, roots)]
        candidates = preferred or candidates
    return candidates[-1] if candidates else None


def frames_of_stack(frame: FrameType | None) -> list[FrameRef]:
    """The frames of a live stack from ``frame`` outwards, returned outermost first."""
    stack: list[FrameRef] = []
    while frame is not None:
        code = frame.f_code
        stack.append(FrameRef(code.co_filename, frame.f_lineno, code.co_name, frame))
        frame = frame.f_back
    stack.reverse()
    return stack


def embedded_traceback_frames(text: str) -> list[FrameRef]:
    """Frames quoted inside an error's text, outermost first.

    A DataLoader worker's error carries its "Original Traceback" and a ``torch.compile``
    error its "from user code:" stack: both point at the user's line better than the
    traceback of the re-raise.
    """
    markers = [i for i in (text.find("Original Traceback"), text.find("from user code:")) if i >= 0]
    if not markers:
        return []
    marker = min(markers)
    return [
        FrameRef(m["path"], int(m["line"]), m["func"].strip())
        for m in _WORKER_FRAME.finditer(text, marker)
    ]


def running_module(
    frames: Sequence[FrameRef], models: Iterable[Any] = (), user: FrameRef | None = None
) -> ModuleRef | None:
    """The innermost ``nn.Module`` whose code was on the stack, named by its model path.

    Modules of the known ``models`` are preferred (a loss module called from the loop is
    not "the module that was running" when a model layer is deeper on the stack). Without
    known models the outermost module on the stack is taken as the model.
    """
    module_type, loss_type = _module_types()
    if module_type is None:
        return None
    on_stack = list(_modules_on_stack(frames, module_type))
    if not on_stack:
        return None
    # A loss module is called like a model but is not one: name it by its variable instead.
    models = [m for m in models if loss_type is None or not isinstance(m, loss_type)]
    if not models:
        # The outermost module that is not a loss is the best guess for the model.
        models = [m for m in on_stack if loss_type is None or not isinstance(m, loss_type)][:1]
    paths = _path_index(models)
    for module in reversed(on_stack):
        if id(module) in paths:
            return ModuleRef(module, paths[id(module)], type(module).__name__)
    innermost = on_stack[-1]
    return ModuleRef(innermost, None, type(innermost).__name__, _variable_name(user, innermost))


def _module_types() -> tuple[type | None, type | None]:
    torch = sys.modules.get("torch")
    nn = getattr(torch, "nn", None)
    loss = getattr(getattr(getattr(nn, "modules", None), "loss", None), "_Loss", None)
    return getattr(nn, "Module", None), loss


def _modules_on_stack(frames: Sequence[FrameRef], module_type: type) -> Iterator[Any]:
    seen: set[int] = set()
    for frame in frames:
        candidate = frame.local("self")
        if isinstance(candidate, module_type) and id(candidate) not in seen:
            seen.add(id(candidate))
            yield candidate


def _path_index(models: Iterable[Any]) -> dict[int, str]:
    index: dict[int, str] = {}
    for model in models:
        try:
            named = list(model.named_modules(remove_duplicate=False))
        except Exception:  # noqa: BLE001 - a broken user module must not break the report
            continue
        for name, module in named:
            # A compiled model wraps the real one as `_orig_mod`: users know the inner names.
            clean = re.sub(r"(^|\.)_orig_mod(\.|$)", r"\1", name).strip(".")
            index.setdefault(id(module), clean)
    return index


def _variable_name(user: FrameRef | None, value: Any) -> str | None:
    if user is None or user.frame is None:
        return None
    for scope in (user.frame.f_locals, user.frame.f_globals):
        for name, candidate in list(scope.items()):
            if candidate is value and not name.startswith("_"):
                return name
    return None
