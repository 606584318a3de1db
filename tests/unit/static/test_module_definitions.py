"""TD221 requires-grad-set-on-module, TD223 layers-in-plain-container, TD506
functional-dropout-ignores-training."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Severity
from torchdoctor.rules.selection import Selection
from torchdoctor.static import LintConfig, lint
from torchdoctor.static.runner import lint_sources

HEADER = """
import math
import torch
import torch.nn.functional as F
from torch import nn
"""


def test_requires_grad_on_modules_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(2, 2)

    def freeze(self):
        self.encoder.requires_grad = False  # expect: TD221

def main():
    model = Net()
    model.requires_grad = False  # expect: TD221
    for child in model.children():
        child.requires_grad = False  # expect: TD221
    for name, sub in model.named_modules():
        sub.requires_grad = True  # expect: TD221
""",
        "TD221",
    )


def test_requires_grad_fix_calls_requires_grad_() -> None:
    found = lint_findings(
        HEADER
        + """
model = nn.Linear(2, 2)
model.requires_grad = False
""",
        "TD221",
    )
    assert found[0].fix is not None
    assert found[0].fix.edits[0].replacement == "model.requires_grad_(False)"


def test_the_message_says_what_each_flag_fails_to_do() -> None:
    # Round 39's VQGAN: a perceptual network the optimizer never holds; what the unset
    # flag costs is the gradients backward still computes, and setting True unfreezes
    # nothing (no optimizer "still updates" a frozen parameter).
    freeze, unfreeze = lint_findings(
        HEADER + "\nmodel = nn.Linear(2, 2)\nmodel.requires_grad = False\n"
        "model.requires_grad = True\n",
        "TD221",
    )
    assert "backward still computes their gradients" in freeze.message
    assert "still get no gradient and are never trained" in unfreeze.message
    assert "still updates" not in unfreeze.message


def test_requires_grad_on_parameters_and_tensors_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
model = nn.Linear(2, 2)
for p in model.parameters():
    p.requires_grad = False
for name, p in model.named_parameters():
    p.requires_grad = False
model.weight.requires_grad = False
x = torch.zeros(2)
x.requires_grad = True
""",
            "TD221",
        )
        == []
    )


def test_requires_grad_on_unknown_or_custom_objects_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
class Flagged(nn.Module):
    requires_grad = True

def f(thing, layer_config):
    thing.requires_grad = False
    layer_config.requires_grad = False
    custom = Flagged()
    custom.requires_grad = False
""",
            "TD221",
        )
        == []
    )


def test_layers_in_plain_containers_are_flagged() -> None:
    assert_marked(
        HEADER
        + """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(n)]  # expect: TD223
        self.heads = {"a": nn.Linear(4, 1), "b": nn.Linear(4, 1)}  # expect: TD223
        self.pair = (Block(), Block())  # expect: TD223
        self.blocks = []  # expect: TD223
        for _ in range(n):
            self.blocks.append(Block())
""",
        "TD223",
    )


def test_plain_container_fix_wraps_in_module_list() -> None:
    found = lint_findings(
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4), nn.Linear(4, 4)]
""",
        "TD223",
    )
    assert found[0].fix is not None
    assert found[0].fix.edits[0].replacement == "nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])"


def test_frozen_modules_hidden_in_a_plain_list_are_information() -> None:
    """A fixed filter or perceptual network frozen by the class and kept in a list is
    hidden from training and checkpoints on purpose; an unfrozen one, or one frozen only
    in another container, stays an error."""
    found = lint_findings(
        HEADER
        + """
class LowPass(nn.Module):
    def __init__(self, channels, taps):
        super().__init__()
        self.register_buffer("taps", taps)
        self.conv = [nn.Conv1d(channels, channels, 5, groups=channels, bias=False)]
        self.conv[0].weight = nn.Parameter(self.taps.expand(channels, -1, -1))
        self.conv[0].requires_grad_(False)

class Perceptual(nn.Module):
    def __init__(self, nets):
        super().__init__()
        self.features = [nn.Linear(4, 4), nn.Linear(4, 4)]
        for net in self.features:
            net.requires_grad_(False)

class Trained(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = [nn.Linear(4, 4)]
        self.frozen = nn.ModuleList([nn.Linear(4, 4)])
        self.frozen[0].requires_grad_(False)
        self.unfrozen = [nn.Linear(4, 4)]
        self.unfrozen[0].requires_grad_(True)
""",
        "TD223",
    )
    assert [(f.message.split("`")[1], f.severity.value) for f in found] == [
        ("self.conv", "info"),
        ("self.features", "info"),
        ("self.heads", "error"),
        ("self.unfrozen", "error"),
    ]
    assert "requires_grad_(False)" in found[0].message


def test_a_list_whose_layer_weight_is_frozen_by_assignment_is_information() -> None:
    """decaNLP's GloVe table: ``self.pretrained[0].weight.requires_grad = False`` freezes
    the embedding kept in a plain list, as ``requires_grad_(False)`` does; the same
    through a loop variable too. Setting it True, or freezing another list, keeps the
    error."""
    found = lint_findings(
        HEADER
        + """
class Glove(nn.Module):
    def __init__(self, vectors):
        super().__init__()
        self.pretrained = [nn.Embedding(*vectors.shape)]
        self.pretrained[0].weight.data = vectors
        self.pretrained[0].weight.requires_grad = False

class Tables(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.tables = [nn.Embedding(n, 8) for n in sizes]
        for table in self.tables:
            table.weight.requires_grad = False

class Tuned(nn.Module):
    def __init__(self, vectors):
        super().__init__()
        self.tuned = [nn.Embedding(*vectors.shape)]
        self.tuned[0].weight.requires_grad = True
        self.other = [nn.Embedding(4, 4)]
        self.frozen = nn.ModuleList([nn.Embedding(4, 4)])
        self.frozen[0].weight.requires_grad = False
""",
        "TD223",
    )
    assert [(f.message.split("`")[1], f.severity.value) for f in found] == [
        ("self.pretrained", "info"),
        ("self.tables", "info"),
        ("self.tuned", "error"),
        ("self.other", "error"),
    ]


def test_a_list_of_modules_that_only_precompute_index_tensors_is_quiet() -> None:
    """LightZero's ``Slicer``: an ``nn.Module`` whose ``__init__`` only computes index
    tensors through tensor methods (``mask.sum().long().item()``,
    ``torch.where(mask)[0].repeat(n)``), so a plain list of them holds no parameter.
    One that also builds a layer through the same kind of chain holds one."""
    source = (
        HEADER
        + """
class Slicer(nn.Module):
    def __init__(self, blocks, mask):
        super().__init__()
        self.size = mask.size(0)
        self.kept = mask.sum().long().item()
        kept = torch.where(mask)[0].repeat(blocks)
        self.indices = kept + mask.size(0) * torch.arange(blocks).repeat_interleave(self.kept)

class Embedder(nn.Module):
    def __init__(self, blocks, masks):
        super().__init__()
        self.slicers = [Slicer(blocks, mask) for mask in masks]
"""
    )
    assert lint_codes(source, "TD223") == []
    with_layer = source.replace(
        "        self.size = mask.size(0)\n",
        "        self.size = mask.size(0)\n        self.proj = nn.Linear(4, 4).float()\n",
    )
    assert [code for code, _ in lint_codes(with_layer, "TD223")] == ["TD223"]


def test_a_dict_of_losses_whose_tensors_come_from_a_project_function_is_quiet() -> None:
    """BiRefNet's pixel losses: an SSIM loss keeps a window built by a function of the
    file that returns a tensor, so the dict holds no parameters; a function returning a
    layer makes it hold one."""
    source = (
        HEADER
        + """
def make_window(size):
    window = torch.full((size, size), 1.0 / size**2)
    return window

def make_layer(size):
    return nn.Conv2d(1, 1, size)

class SSIMLoss(nn.Module):
    def __init__(self, size=11):
        super().__init__()
        self.window = make_window(size)

class LearnedLoss(nn.Module):
    def __init__(self, size=11):
        super().__init__()
        self.filter = make_layer(size)

class PixLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.criterions = {{}}
        self.criterions["ssim"] = SSIMLoss()
        self.criterions["bce"] = nn.BCELoss(){extra}
"""
    )
    assert_marked(source.format(extra=""), "TD223")
    learned = source.format(extra='\n        self.criterions["learned"] = LearnedLoss()')
    learned = learned.replace("self.criterions = {}", "self.criterions = {}  # expect: TD223")
    assert_marked(learned, "TD223")


def test_registered_or_parameter_free_containers_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
class Net(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])
        self.acts = [nn.ReLU(), nn.Dropout(0.1)]
        self.losses = [nn.MSELoss(), nn.L1Loss()]
        self.sizes = [4, 8, 16]
        parts = [nn.Linear(4, 4), nn.ReLU()]
        self.body = nn.Sequential(*parts)
        self.stages = [nn.Linear(4, 4), nn.Linear(4, 4)]
        self.trunk = nn.Sequential(*self.stages)
        self.named = [self.body]
""",
            "TD223",
        )
        == []
    )


def test_parameter_free_layers_in_plain_containers_are_quiet() -> None:
    """Pads, pools, activations, dropout, resampling and reshaping layers hold no
    parameters: a plain list or dict of them loses nothing, whatever the import spelling."""
    assert (
        lint_codes(
            HEADER
            + """
from torch.nn import ReflectionPad2d
from torch.nn.modules.padding import ReplicationPad1d

class Generator(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.pads = [nn.ReflectionPad2d(3), ReflectionPad2d(1), nn.ZeroPad2d(2)]
        self.pools = {"max": nn.MaxPool2d(2), "avg": nn.AdaptiveAvgPool2d(1), "lp": nn.LPPool2d(2)}
        self.acts = (nn.ReLU(), nn.LeakyReLU(0.2), nn.Tanh(), nn.Softmin(dim=1), nn.RReLU())
        self.misc = [nn.Identity(), nn.Dropout(0.5), nn.Upsample(scale_factor=2)]
        self.shuffles = [nn.PixelUnshuffle(2), nn.PixelShuffle(2), nn.Flatten()]
        self.edge = [ReplicationPad1d(1), nn.CircularPad2d(1), nn.ConstantPad3d(1, 0.0)]
        self.blocks = []
        for _ in range(n):
            self.blocks.append(nn.ReflectionPad1d(1))
""",
            "TD223",
        )
        == []
    )


def test_containers_of_project_blocks_without_parameters_are_quiet() -> None:
    """A block of the project whose __init__ builds only pooling or activations (or
    nothing), directly, through a parameter-free base or through another such block,
    holds no parameters or buffers: a plain list of them loses nothing."""
    assert (
        lint_codes(
            HEADER
            + """
class MovingAvg(nn.Module):
    def __init__(self, kernel_size, stride):
        super(MovingAvg, self).__init__()
        self.kernel_size = kernel_size
        self.avg = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=0)

class Decomp(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.moving_avg = MovingAvg(kernel_size, stride=1)

class Shift(nn.Module):
    def __init__(self, steps=1):
        super().__init__()
        self.steps = int(steps)

class Multi(nn.Module):
    def __init__(self, kernels):
        super().__init__()
        self.decomps = [Decomp(k) for k in kernels]
        self.shifts = {"a": Shift(1), "b": Shift(math.floor(2.5))}
        self.blocks = []
        for k in kernels:
            self.blocks.append(MovingAvg(k, 1))
""",
            "TD223",
        )
        == []
    )


def test_containers_of_project_blocks_with_parameters_or_unknown_parts_still_flag() -> None:
    """A block that creates a parameter or buffer, builds a layer with parameters (even
    through another block), or calls something that could build one, is not proved free."""
    assert_marked(
        HEADER
        + """
import timm

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

class Buffered(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(3))

class Proj(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()
        self.fc = nn.Linear(4, 4)

class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Proj()

class Built(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = self._make()

    def _make(self):
        return nn.Linear(2, 2)

class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("resnet18")

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = [Scaled(), Scaled()]  # expect: TD223
        self.b = [Buffered()]  # expect: TD223
        self.c = [Wrapper() for _ in range(2)]  # expect: TD223
        self.d = [Built()]  # expect: TD223
        self.e = [Backbone()]  # expect: TD223
""",
        "TD223",
    )


def test_parameter_free_layers_beside_a_layer_with_parameters_still_flag() -> None:
    assert_marked(
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = [nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.ReLU()]  # expect: TD223
        self.norms = [nn.PReLU(), nn.Identity()]  # expect: TD223
""",
        "TD223",
    )


def test_containers_registered_by_hand_or_outside_modules_are_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
class Registered(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(2)]
        for i, layer in enumerate(self.layers):
            self.add_module(f"layer{i}", layer)

class Config:
    def __init__(self):
        self.layers = [nn.Linear(4, 4)]
""",
            "TD223",
        )
        == []
    )


def test_a_menu_of_modules_whose_pick_is_registered_is_quiet() -> None:
    """A dict of candidate backbones from which the one in use is stored in a registered
    attribute (directly, or through a method that returns it): its parameters are in
    ``parameters()``; the others are never run. A container also read anywhere else (a
    forward that runs every module in it) is still flagged."""
    assert_marked(
        HEADER
        + """
class ThroughAHelper(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.candidates = {"small": nn.Linear(4, 4), "large": nn.Linear(4, 8)}
        self.backbone = self._pick(name)

    def _pick(self, name):
        try:
            chosen = self.candidates[name]
        except KeyError:
            raise ValueError(name)
        return chosen

    def forward(self, x):
        return self.backbone(x)

class Direct(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.options = [nn.Linear(4, 4), nn.Linear(4, 2)]
        self.encoder = self.options[name]

class AlsoRunsTheMenu(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.heads = {"a": nn.Linear(4, 1), "b": nn.Linear(4, 1)}  # expect: TD223
        self.head = self.heads[name]

    def forward(self, x):
        out = 0
        for head in self.heads.values():
            out = out + head(x)
        return out

class PickedButNotStored(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = {"a": nn.Linear(4, 4)}  # expect: TD223

    def forward(self, x, name):
        return self.blocks[name](x)
""",
        "TD223",
    )


def test_functional_dropout_without_training_is_flagged() -> None:
    assert_marked(
        HEADER
        + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        x = F.dropout(self.fc(x), 0.5)  # expect: TD506
        x = F.dropout2d(x, p=0.1)  # expect: TD506
        return self.helper(x)

    def helper(self, x):
        return nn.functional.alpha_dropout(x, 0.2)  # expect: TD506
""",
        "TD506",
    )


@pytest.mark.parametrize(
    ("guard", "flagged"),
    [
        # incremental_learning's MCCosineClassifier: the training path returns first,
        # and the evaluation path samples dropout masks on purpose (MC-dropout)
        ("if self.training:\n            return self.head(F.dropout(x, 0.2, True))", False),
        ("if self.training and x.dim() == 2:\n            raise ValueError(x.shape)", False),
        # an early exit on something else, or a mode test that does not leave, is no
        # evaluation path written on purpose
        ("if x is None:\n            return x", True),
        ("if self.training:\n            x = x * 1.0", True),
    ],
)
def test_dropout_after_an_exit_on_the_mode_is_the_other_modes_path(
    guard: str, flagged: bool
) -> None:
    source = (
        HEADER
        + f"""
class MCHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        {guard}
        samples = [self.head(F.dropout(x, 0.2)) for _ in range(10)]
        return torch.stack(samples).mean(0)
"""
    )
    assert [code for code, _ in lint_codes(source, "TD506")] == (["TD506"] if flagged else [])


@pytest.mark.parametrize(
    ("doc", "flagged"),
    [
        # s3prl's Taco2Prenet, after Tacotron 2: dropout on in evaluation, on purpose
        ("This module always applies dropout even in evaluation.", False),
        ("Prenet whose dropout stays on at inference, as in Tacotron 2.", False),
        # a docstring that says nothing of evaluation, or nothing of dropout
        ("Two linear layers with dropout.", True),
        ("Always on the GPU, even in evaluation.", True),
    ],
)
def test_dropout_documented_to_stay_on_in_evaluation_is_quiet(doc: str, flagged: bool) -> None:
    source = (
        HEADER
        + f"""
class Prenet(nn.Module):
    \"\"\"{doc}\"\"\"

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5)
"""
    )
    assert [code for code, _ in lint_codes(source, "TD506")] == (["TD506"] if flagged else [])


@pytest.mark.parametrize(
    ("loop", "flagged"),
    [
        # MMSelfSup's CAE: the teacher's parameters, drawn beside the backbone's
        (
            "for p_b, param_teacher in zip(self.backbone.parameters(), self.teacher.parameters()):",
            False,
        ),
        ("for i, param_teacher in enumerate(self.teacher.parameters()):", False),
        ("for name, param_teacher in self.teacher.named_parameters():", False),
        # modules drawn the same way are modules
        ("for m_b, param_teacher in zip(self.backbone.children(), self.teacher.children()):", True),
    ],
)
def test_td221_a_loop_name_drawn_from_parameters_is_a_parameter(loop: str, flagged: bool) -> None:
    source = (
        HEADER
        + f"""
class CAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
        self.teacher = nn.Linear(4, 4)

    def init_teacher(self):
        {loop}
            param_teacher.requires_grad = False
"""
    )
    assert [code for code, _ in lint_codes(source, "TD221")] == (["TD221"] if flagged else [])


def test_dropout_switched_by_an_input_the_caller_feeds_is_quiet() -> None:
    """DeepChem's CNN: ``x, dropout_switch = inputs``, then ``if dropout > 0. and
    dropout_switch:`` around ``F.dropout``; the model feeds 0 in predict mode. A switch
    with a default, the rate itself, or a data argument (a mask) decides nothing."""
    source = """
import torch.nn.functional as F
from torch import nn

class CNN(nn.Module):
    def forward(self, inputs):
        x, dropout_switch = inputs
        for layer, dropout in zip(self.layers, self.dropouts):
            x = layer(x)
            if dropout > 0. and dropout_switch:
                x = F.dropout(x, dropout)
        return x

class Defaults(nn.Module):
    def forward(self, x, mask, use_dropout=True):
        if use_dropout:
            x = F.dropout(x, 0.5)  # expect: TD506
        if mask is not None:
            x = F.dropout(x, 0.5)  # expect: TD506
        if self.p > 0:
            x = F.dropout(x, self.p)  # expect: TD506
        return x
"""
    assert_marked(source, "TD506")


def test_dropout_a_switch_leaves_off_by_default_is_quiet() -> None:
    """Protenix: ``if mc_dropout:`` around ``F.dropout``, where ``mc_dropout: bool =
    False`` is a parameter the inference path sets per sample (Monte Carlo dropout): the
    dropout runs only when a caller asks for it. A switch whose default turns it on, or
    a branch its default takes, still leaves it on after ``eval()``."""
    source = """
import torch.nn.functional as F
from torch import nn

class Trunk(nn.Module):
    def forward(self, z, mc_dropout: bool = False, *, deterministic=True):
        if mc_dropout:
            z = F.dropout(z, p=0.4)
        if not deterministic:
            z = F.dropout(z, p=0.1)
        return z

class OnByDefault(nn.Module):
    def forward(self, z, mc_dropout=True, deterministic=False):
        if mc_dropout:
            z = F.dropout(z, p=0.4)  # expect: TD506
        if deterministic:
            pass
        else:
            z = F.dropout(z, p=0.1)  # expect: TD506
        return z
"""
    assert_marked(source, "TD506")


def test_dropout_under_a_switch_named_for_inference_is_quiet() -> None:
    """IMS-Toucan's ``_forward(..., is_inference=False)``: ``F.dropout`` in both
    branches of ``if is_inference:``, the author's own switch between the inference path
    (dropout kept there on purpose) and the training path. Either side of an ``if`` that
    reads a switch named for inference or evaluation is written for its mode, and so is
    the code after such an ``if`` that returns; a switch named for something else
    (``use_dropout``), or a test on the data, decides nothing."""
    source = """
import torch.nn.functional as F
from torch import nn

class Synth(nn.Module):
    def _forward(self, x, gold=None, is_inference=False):
        if is_inference:
            h = F.dropout(self.reduce(x), p=0.1)
        else:
            h = F.dropout(self.reduce(x), p=0.1) + gold
        return h

    def predict_or_fit(self, x, gold, predicting=False):
        if predicting:
            return self.head(F.dropout(x, 0.1))
        return self.loss(F.dropout(x, 0.1), gold)

    def decode(self, x, args):
        if not self.is_test:
            x = F.dropout(x, 0.2)
        if args.eval_mode and x.dim() == 3:
            x = F.dropout(x, 0.2)
        return x

class Plain(nn.Module):
    def forward(self, x, use_dropout=True):
        x = F.dropout(x, 0.5)  # expect: TD506
        if x.dim() == 3:
            x = F.dropout(x, 0.5)  # expect: TD506
        if self.use_dropout:
            x = F.dropout(x, 0.5)  # expect: TD506
        if x.size(0) > self.eval_batch_size:
            x = F.dropout(x, 0.5)  # expect: TD506
        return x
"""
    assert_marked(source, "TD506")


def test_dropout_in_a_module_that_puts_itself_in_eval_mode_is_quiet() -> None:
    """IMS-Toucan's ``InferenceToucanTTS``: an inference-only module whose ``__init__``
    ends with ``self.eval()``, and whose ``_forward`` still applies ``F.dropout``; or a
    method that calls ``self.eval()`` and then the dropout itself. The author switched
    the module to evaluation and kept the dropout there on purpose. ``eval()`` on another
    module (a frozen teacher) says nothing of this one, and a ``predict`` that calls
    ``self.eval()`` and then ``self.forward(x)`` is the mistake the rule is for: it
    believes eval mode switches the functional dropout off."""
    source = """
import torch.nn.functional as F
from torch import nn

class InferenceSynth(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.reduce = nn.Linear(dim, dim)
        self.eval()

    def _forward(self, x):
        return F.dropout(self.reduce(x), p=0.1)

    def forward(self, x):
        return self._forward(x)

class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.train(False)

    def forward(self, x):
        return F.dropout(x, 0.1)

class Sampler(nn.Module):
    def sample(self, x):
        self.eval()
        return [F.dropout(self.head(x), 0.2) for _ in range(8)]

class Student(nn.Module):
    def __init__(self, teacher):
        super().__init__()
        self.teacher = teacher
        self.teacher.eval()
        teacher.eval()

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5)  # expect: TD506

    def predict(self, x):
        self.eval()
        return self.forward(x)

    def refresh(self, x):
        self.eval()
        self.train()
        return F.dropout(x, 0.5)  # expect: TD506
"""
    assert_marked(source, "TD506")


@pytest.mark.parametrize("callee_first", [False, True])
def test_functional_dropout_whose_rate_every_caller_sets_from_the_mode_is_quiet(
    callee_first: bool,
) -> None:
    """OLMo: ``_attention(..., dropout_p)`` runs ``F.dropout(w, p=dropout_p)``, and the
    base class's caller passes ``dropout_p=0.0 if not self.training else p``: rate 0 in
    eval mode. A caller passing a fixed rate keeps the finding. The caller may come after
    the method in the class: the rule reads every method of the file, not those walked
    so far."""
    source = (
        HEADER
        + """
class Block(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, w):
        return self._attention(w, dropout_p=0.0 if not self.training else self.p)

    def _attention(self, w, dropout_p=0.0):
        return F.dropout(w.softmax(-1), p=dropout_p){mark}

class LlamaBlock(Block):
    def _attention(self, w, dropout_p=0.0):
        return nn.functional.dropout(w.softmax(-1), p=dropout_p){mark}
"""
    )
    if callee_first:
        forward = (
            "    def forward(self, w):\n"
            "        return self._attention(w, dropout_p=0.0 if not self.training else self.p)\n"
        )
        source = source.replace(forward + "\n", "").replace(
            "\nclass LlamaBlock", "\n" + forward + "\nclass LlamaBlock"
        )
        assert source.index("def _attention") < source.index("def forward")
    assert_marked(source.format(mark=""), "TD506")
    fixed_rate = source.replace("0.0 if not self.training else self.p", "self.p")
    assert_marked(fixed_rate.format(mark="  # expect: TD506"), "TD506")


def test_dropout_fix_adds_training_flag() -> None:
    found = lint_findings(
        HEADER
        + """
class Net(nn.Module):
    def forward(self, x):
        return F.dropout(x, 0.5)
""",
        "TD506",
    )
    assert found[0].fix is not None
    assert found[0].fix.edits[0].replacement == ", training=self.training"


def test_functional_dropout_that_follows_the_mode_is_quiet() -> None:
    assert (
        lint_codes(
            HEADER
            + """
class Net(nn.Module):
    def forward(self, x, **options):
        x = F.dropout(x, 0.5, training=self.training)
        x = F.dropout(x, 0.5, self.training)
        x = F.dropout(x, **options)
        if self.training:
            x = F.dropout(x, 0.2)
        return x

def plain_function(x):
    return F.dropout(x, 0.5)

class NotAModule:
    def forward(self, x):
        return F.dropout(x, 0.5)
""",
            "TD506",
        )
        == []
    )


def test_a_local_dropout_function_is_quiet() -> None:
    assert (
        lint_codes(
            """
from torch import nn

def dropout(x, p):
    return x

class Net(nn.Module):
    def forward(self, x):
        return dropout(x, 0.5)
""",
            "TD506",
        )
        == []
    )


_MODELS = """
from torch import nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

class Settings:
    requires_grad = True
"""


def _project_codes(train: str) -> list[tuple[str, int]]:
    sources = [
        ("proj/models/encoders.py", textwrap.dedent(_MODELS)),
        ("proj/train.py", textwrap.dedent(train)),
    ]
    found = lint_sources(sources, Selection.from_options(("TD221",)))
    return sorted((f.code, f.location.line or 0) for f in found)


def test_module_class_of_another_file_is_found_through_the_project_index() -> None:
    assert _project_codes("""
from models.encoders import Encoder

def main():
    backbone = Encoder()
    backbone.requires_grad = False
""") == [("TD221", 6)]


def test_non_module_class_of_another_file_is_quiet() -> None:
    assert (
        _project_codes("""
from models.encoders import Settings

def main():
    settings = Settings()
    settings.requires_grad = False
""")
        == []
    )


# --- TD221: a layer reached through an instance of a model class ----------------------------


def test_td221_flags_a_layer_of_a_model_instance() -> None:
    assert_marked(
        """
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.head = nn.Linear(4, 2)
            self.block = Block()
            self.scale = nn.Parameter(torch.ones(1))
            self.name = "net"
    def adapt():
        model = Net()
        model.head.requires_grad = False  # expect: TD221
        model.block.requires_grad = False  # expect: TD221
        model.scale.requires_grad = False
        model.name.requires_grad = False
    """,
        "TD221",
    )


FREEZE_HELPER = """
import torch
from torch import nn
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = nn.Linear(8, 2)
        self.scale = 2.0
def set_trainable(module, flag):
    module.requires_grad = flag{mark}
def setup(model):
    set_trainable({passed}, False)
setup(Net())
"""


@pytest.mark.parametrize(
    "passed, flagged",
    [
        ("model.encoder", True),  # a layer the class builds from nn.Sequential
        ("model.head", True),
        ("model", True),  # the model itself, typed by setup's caller
        ("model.scale", False),  # not a module
        ("model.missing", False),  # nothing known about it
    ],
)
def test_td221_in_a_helper_typed_by_its_callers(passed: str, flagged: bool) -> None:
    mark = "  # expect: TD221" if flagged else ""
    assert_marked(FREEZE_HELPER.format(passed=passed, mark=mark), "TD221")


def test_td221_an_attribute_a_project_class_builds_as_a_parameter_is_not_proven(
    tmp_path: Path,
) -> None:
    """PENet: main.py reaches its models through `from model import *`, so the index
    cannot tell `model.encoder3`; model.py builds it as an nn.Parameter buffer. The name
    alone (an encoder) proves no module there; a real module attribute still does."""
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch import nn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.encoder3 = nn.Parameter(torch.zeros(9, 9), requires_grad=False)\n"
        "        self.encoder = nn.Linear(4, 4)\n",
        encoding="utf-8",
    )
    (tmp_path / "main.py").write_text(
        "from model import *\n\n"
        "def main(args):\n"
        "    model = Net()\n"
        "    model.encoder3.requires_grad = False\n"
        "    model.encoder.requires_grad = False\n",
        encoding="utf-8",
    )
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD221")
    assert [f.location.line for f in found] == [6]


def test_functional_dropout_whose_rate_the_evaluating_caller_zeroes_is_quiet() -> None:
    """HCCF: ``F.dropout(x, p=1 - keep_rate)`` with ``keep_rate`` a forward argument;
    training passes the configured keep rate, ``full_predict`` passes 1.0 (rate 0). When
    no caller zeroes the rate, evaluation drops activations."""
    source = (
        HEADER
        + """
class Hypergraph(nn.Module):
    def __init__(self, keep_rate):
        super().__init__()
        self.keep_rate = keep_rate
        self.hyper = nn.Parameter(torch.randn(8, 4))

    def forward(self, x, keep_rate):
        return x @ F.dropout(self.hyper, p=1 - keep_rate){mark}

    def loss(self, x):
        return self.forward(x, self.keep_rate).pow(2).mean()

    def predict(self, x):
        return self.forward(x, {evaluation})
"""
    )
    assert_marked(source.format(mark="", evaluation="1.0"), "TD506")
    assert_marked(source.format(mark="", evaluation="keep_rate=1"), "TD506")
    kept = source.format(mark="  # expect: TD506", evaluation="self.keep_rate")
    assert_marked(kept, "TD506")


def test_td223_names_an_example_layer_only_when_it_is_short() -> None:
    source = (
        HEADER
        + """
class Net(nn.Module):
    def __init__(self, vocabulary, size):
        super().__init__()
        self.parts = (nn.Linear(4, 4), nn.Linear(4, 4))
        self.long = [nn.Embedding(len(vocabulary.tokens_by_frequency), size, padding_idx=0)]
"""
    )
    short, long = lint_findings(source, "TD223")
    assert "such as `nn.Linear(4, 4)`" in short.message
    assert "holding modules: PyTorch does not register them" in long.message


@pytest.mark.parametrize(
    ("layer", "flagged"),
    [
        # DDSP-SVC: a loss module built around a torchaudio transform, whose only state
        # is a window computed from its arguments
        ("torchaudio.transforms.Spectrogram(n_fft=n_fft, power=1)", False),
        ("torchaudio.transforms.MelSpectrogram(16000, n_fft=n_fft)", False),
        # a learnable layer beside it: its parameters are lost
        ("nn.Conv1d(1, 1, n_fft)", True),
    ],
)
def test_td223_a_dict_of_modules_holding_only_audio_transforms(layer: str, flagged: bool) -> None:
    source = f"""
import torch
import torchaudio
from torch import nn


class SpectralLoss(nn.Module):
    def __init__(self, n_fft):
        super().__init__()
        self.spec = {layer}

    def forward(self, x, y):
        return (self.spec(x) - self.spec(y)).abs().mean()


class MultiScaleLoss(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.losses = {{}}
        for n in sizes:
            self.losses[n] = SpectralLoss(n).to("cuda")

    def forward(self, x, y, n):
        return self.losses[n](x, y)
"""
    assert bool(lint_codes(source, "TD223")) is flagged


@pytest.mark.parametrize(
    ("use", "flagged"),
    [
        # iterating the container, or calling each module it holds, registers nothing
        (
            "for i, layer in enumerate(self.layers):\n            x = layer(x)\n        return x",
            True,
        ),
        ("return sum(layer(x) for layer in self.layers)", True),
        ("return torch.stack([layer(x) for layer in self.layers])", True),
        ("return [layer(x) for _, layer in zip(range(2), self.layers)]", True),
        ("return [layer(x) for layer in self.layers][: len(self.layers)]", True),
        # the modules are handed on: whatever receives them may register them
        ("return torch.relu(torch.stack([layer(x) for layer in self.layers]).mean(0))", True),
        ("return nn.Sequential(*self.layers)(x)", False),
        ("return nn.ModuleList(sorted(self.layers, key=id))[0](x)", False),
        ("return nn.ModuleDict(dict(zip('abc', self.layers)))['a'](x)", False),
        ("return nn.ModuleList([layer for layer in self.layers])[0](x)", False),
        ("return run_all(self.layers, x)", False),
    ],
)
def test_td223_iterating_a_plain_list_is_not_handing_it_on(use: str, flagged: bool) -> None:
    source = f"""
import torch
from torch import nn

from helpers import run_all


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(4, 4) for _ in range(3)]

    def forward(self, x):
        {use}
"""
    assert bool(lint_codes(source, "TD223")) is flagged


def test_td223_a_dict_whose_values_each_run_is_reported() -> None:
    source = """
import torch
from torch import nn


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = {"a": nn.Linear(4, 1), "b": nn.Linear(4, 1)}

    def forward(self, x):
        return {name: head(x) for name, head in self.heads.items()}
"""
    assert lint_codes(source, "TD223") == [("TD223", 9)]


_TAKES_A_MODULE_OR_A_PARAMETER = """
import torch
from torch import nn


def set_requires_grad(model, flag):
    {shape}
"""


@pytest.mark.parametrize(
    ("shape", "flagged"),
    [
        # GeneFace: a helper for a module or a single parameter; the else arm is the tensor
        (
            "if isinstance(model, torch.nn.Module):\n"
            "        for p in model.parameters():\n"
            "            p.requires_grad = flag\n"
            "    else:\n"
            "        model.requires_grad = flag",
            False,
        ),
        (
            "if not isinstance(model, (nn.Module, nn.Sequential)):\n"
            "        model.requires_grad = flag",
            False,
        ),
        # the test says it IS a module there, or asks about another name
        ("if isinstance(model, nn.Module):\n        model.requires_grad = flag", True),
        (
            "if isinstance(flag, nn.Module):\n        pass\n"
            "    else:\n        model.requires_grad = flag",
            True,
        ),
        (
            "if isinstance(model, torch.Tensor):\n        pass\n"
            "    else:\n        model.requires_grad = flag",
            True,
        ),
    ],
)
def test_td221_quiet_where_an_isinstance_test_says_it_is_no_module(
    shape: str, flagged: bool
) -> None:
    source = _TAKES_A_MODULE_OR_A_PARAMETER.format(shape=shape)
    assert bool(lint_codes(source, "TD221")) is flagged


_SAMPLER_NOISE = """
import torch
from torch import nn


class Sampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 4)

    @torch.no_grad()
    def p_sample(self, x, temperature=1.0, noise_dropout={default}):
        noise = torch.randn_like(x) * temperature
        if {test}:
            noise = torch.nn.functional.dropout(noise, p=noise_dropout)
        return self.net(x) + noise
"""


@pytest.mark.parametrize(
    ("default", "test", "flagged"),
    [
        # latent-diffusion's sampler (rcg): a noise dropout its default rate switches off
        ("0.0", "noise_dropout > 0.0", False),
        ("0", "noise_dropout != 0", False),
        # on by default, or a test the defaults do not decide
        ("0.1", "noise_dropout > 0.0", True),
        ("0.0", "temperature > 0.5", True),
    ],
)
def test_td506_a_rate_whose_default_leaves_the_branch_untaken(
    default: str, test: str, flagged: bool
) -> None:
    source = _SAMPLER_NOISE.format(default=default, test=test)
    assert bool(lint_codes(source, "TD506")) is flagged


@pytest.mark.parametrize(
    ("registration", "flagged"),
    [
        # TPLinker: each listed layer's weight and bias registered on the module
        ('self.register_parameter("weight_{}".format(i), fc.weight)', False),
        ('self.register_parameter(f"bias_{i}", fc.bias)', False),
        # a parameter of something else, or a buffer, registers nothing of the layers
        ('self.register_parameter(f"scale_{i}", nn.Parameter(torch.ones(3)))', True),
        ('self.register_buffer(f"mask_{i}", fc.weight)', True),
    ],
)
def test_td223_a_loop_registering_each_listed_layers_parameters(
    registration: str, flagged: bool
) -> None:
    source = f"""
import torch
from torch import nn

class Tagger(nn.Module):
    def __init__(self, hidden, relations):
        super().__init__()
        self.heads = [nn.Linear(hidden, 3) for _ in range(relations)]
        for i, fc in enumerate(self.heads):
            {registration}

    def forward(self, x):
        return torch.stack([head(x) for head in self.heads], dim=1)
"""
    assert bool(lint_findings(source, "TD223")) is flagged


@pytest.mark.parametrize(
    ("helper", "flagged"),
    [
        # pytorch_RVAE's Highway: a method of the class registers each tensor it is handed
        (
            "for j, p in enumerate(tensors):\n            self.register_parameter(f'{name}{j}', p)",
            False,
        ),
        ("for p in tensors:\n            self.register_parameter(name=name, param=p)", False),
        # a helper registering a new tensor, or keeping buffers, registers none of them
        ("self.register_parameter(name, nn.Parameter(torch.ones(3)))", True),
        (
            "for j, p in enumerate(tensors):\n            self.register_buffer(f'{name}{j}', p)",
            True,
        ),
    ],
)
def test_td223_layers_whose_parameters_a_method_of_the_class_registers(
    helper: str, flagged: bool
) -> None:
    source = f"""
import torch
from torch import nn

class Highway(nn.Module):
    def __init__(self, size, depth):
        super().__init__()
        self.gates = [nn.Linear(size, size) for _ in range(depth)]
        for i, layer in enumerate(self.gates):
            self._add(layer.parameters(), f"gate{{i}}")

    def _add(self, tensors, name):
        {helper}

    def forward(self, x):
        for gate in self.gates:
            x = torch.sigmoid(gate(x)) * x
        return x
"""
    assert bool(lint_findings(source, "TD223")) is flagged


_ZONEOUT_CELL = """
import torch
import torch.nn.functional as F
from torch import nn


class Cell(nn.Module):
    def __init__(self, size, zoneout=0.0):
        super(Cell, self).__init__()
        self.proj = nn.Linear(size, size)
        self._zoneout = zoneout

    def forward(self, h, x):
        new = torch.tanh(self.proj(x))
        if self._zoneout > 0.0:
            keep = F.dropout(torch.ones_like(h), p=self._zoneout) > 0
            new = torch.where(keep, new, h)
        return new
"""


@pytest.mark.parametrize(
    ("built", "flagged"),
    [
        # Precipitation-Nowcasting: every network builds its TrajGRU with zoneout=0.0
        ("Cell(8, zoneout=0.0), Cell(16, zoneout=0.0)", False),
        ("Cell(8), Cell(16, 0.0)", False),
        # one network turns the zoneout on: evaluation keeps dropping there
        ("Cell(8, zoneout=0.0), Cell(16, zoneout=0.1)", True),
        ("Cell(8, zoneout=rate)", True),
    ],
)
def test_td506_an_attribute_rate_every_construction_turns_off(
    tmp_path: Path, built: str, flagged: bool
) -> None:
    (tmp_path / "cells.py").write_text(_ZONEOUT_CELL)
    (tmp_path / "nets.py").write_text(
        f"from cells import Cell\n\n\ndef build(rate):\n    return [{built}]\n"
    )
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD506")
    assert bool(found) is flagged


def test_td506_an_attribute_rate_of_a_class_used_as_a_base_is_still_flagged(
    tmp_path: Path,
) -> None:
    """A subclass builds the cell through its own constructor, which lint does not
    follow: the attribute's value is unknown."""
    (tmp_path / "cells.py").write_text(
        _ZONEOUT_CELL + "\n\nclass Wide(Cell):\n    pass\n\n\nnet = [Cell(8), Wide(8, 0.3)]\n"
    )
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD506")
    assert [f.location.line for f in found] == [16]


def test_td506_a_rate_each_call_must_pass_is_information() -> None:
    """pytorch_RVAE's decoder takes the rate as a parameter with no default, and the
    evaluating callers (in another file, through the module's call) pass 0: lint cannot
    see them, so the finding is information. A caller of the file handing in the
    module's fixed rate keeps it an error."""
    source = (
        HEADER
        + """
class Decoder(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.p = p
        self.out = nn.Linear(8, 8)

    def forward(self, x, drop_prob):
        return self.out(F.dropout(x, drop_prob))
{caller}
"""
    )
    (alone,) = lint_findings(source.format(caller=""), "TD506")
    assert alone.severity is Severity.INFO
    assert "the rate comes from `drop_prob`, a parameter each call must give" in alone.message
    fixed = "\n    def decode(self, x):\n        return self.forward(x, self.p)\n"
    (configured,) = lint_findings(source.format(caller=fixed), "TD506")
    assert configured.severity is Severity.ERROR
