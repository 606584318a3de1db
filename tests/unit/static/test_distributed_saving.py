"""TD804 checkpoint-saved-on-every-rank and TD805 ddp-prefixed-state-dict."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.static.helpers import assert_marked, lint_codes, lint_findings
from torchdoctor.findings import Applicability, Severity
from torchdoctor.static import LintConfig, lint

# --- TD804 ------------------------------------------------------------------------------

DDP_SCRIPT = """
import torch
import torch.distributed as dist

def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    for epoch in range(10):
        train(epoch)
{save}

if __name__ == "__main__":
    main()
"""


def td804(save: str, source: str = DDP_SCRIPT) -> list[tuple[str, int]]:
    return lint_codes(source.format(save=save), "TD804", "TD001")


def test_an_unguarded_save_in_a_distributed_script_is_flagged() -> None:
    assert td804('        torch.save(model.state_dict(), "last.pt")') == [("TD804", 10)]


def test_a_helper_called_without_a_guard_is_flagged_inside_the_helper() -> None:
    source = (
        DDP_SCRIPT
        + """
def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)
"""
    )
    assert td804("        save_checkpoint(model, 'last.pt')", source) == [("TD804", 16)]


def test_a_method_reached_through_an_instance_is_followed() -> None:
    source = """
    import torch
    import torch.distributed as dist
    class Trainer:
        def save(self):
            torch.save(self.model.state_dict(), "last.pt")
        def fit(self):
            dist.init_process_group("nccl")
            for epoch in range(3):
                self.save()
    trainer = Trainer()
    trainer.fit()
    """
    assert lint_codes(source, "TD804", "TD001") == [("TD804", 6)]


def test_rank_zero_guards_are_recognised() -> None:
    for guard in (
        "rank == 0",
        "dist.get_rank() == 0",
        "args.local_rank in [-1, 0]",
        "not rank",
        "is_main_process()",
        "accelerator.is_main_process",
        "trainer.is_global_zero",
        "int(os.environ['RANK']) == 0",
        "not dist.is_initialized() or dist.get_rank() == 0",
        "rank == 0 and epoch % 5 == 0",
        "is_master",
        "is_root",
        "backend.is_root_worker()",
    ):
        save = f"        if {guard}:\n            torch.save(model.state_dict(), 'last.pt')"
        assert td804(save) == [], guard


def test_a_root_that_names_a_path_is_no_rank_check() -> None:
    for guard in ("data_root", "root", "args.root"):
        save = f"        if {guard}:\n            torch.save(model.state_dict(), 'last.pt')"
        assert td804(save) != [], guard


def test_a_variable_bound_to_the_rank_is_a_rank() -> None:
    source = """
    import os
    import torch
    import torch.distributed as dist
    class Trainer:
        def __init__(self):
            self.gpu_id = int(os.environ["LOCAL_RANK"])
            dist.init_process_group("nccl")
        def save(self):
            torch.save(self.model.state_dict(), "last.pt")
        def fit(self):
            for epoch in range(3):
                if self.gpu_id == 0 and epoch % 5 == 0:
                    self.save()
                node_rank = int(os.getenv("RANK", "0"))
                if node_rank % 8 == 0:
                    torch.save(self.model.state_dict(), "node.pt")
    Trainer().fit()
    """
    assert lint_codes(source, "TD804", "TD001") == []


def test_an_else_branch_of_a_nonzero_rank_test_is_guarded() -> None:
    save = (
        "        if rank != 0:\n            pass\n        else:\n"
        "            torch.save(model.state_dict(), 'last.pt')"
    )
    assert td804(save) == []


@pytest.mark.parametrize(
    "test",
    ["args.distributed", "use_ddp", "dist.is_initialized()", "args.world_size > 1", "is_dist"],
)
def test_the_single_process_branch_of_a_distributed_test_is_guarded(test: str) -> None:
    """MONAI's Swin UNETR pre-training: ``if args.distributed:`` saves on rank 0, and the
    ``else`` saves plainly, in what is then a single process. The save after the ``if``
    still runs on every rank."""
    source = f"""
import torch
import torch.distributed as dist

def main(args, model, use_ddp):
    dist.init_process_group("nccl")
    is_dist = args.world_size > 1
    if {test}:
        if dist.get_rank() == 0:
            torch.save(model.state_dict(), "final.pth")
    else:
        torch.save(model.state_dict(), "final.pth")
    if not {test}:
        torch.save(model.state_dict(), "plain.pth")
    torch.save(model.state_dict(), "shared.pth")

if __name__ == "__main__":
    main(args, model, True)
"""
    assert lint_codes(source, "TD804", "TD001") == [("TD804", 15)]


def test_an_early_exit_on_other_ranks_guards_what_follows() -> None:
    source = """
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    def save_checkpoint(model, path):
        if dist.get_rank() != 0:
            return
        torch.save(model.state_dict(), path)
    for epoch in range(3):
        save_checkpoint(model, "last.pt")
        for rank_batch in loader:
            if not is_main_process():
                continue
            torch.save(model.state_dict(), "step.pt")
    """
    assert lint_codes(source, "TD804", "TD001") == []


def test_guarded_callers_and_decorators_guard_the_helper() -> None:
    source = (
        DDP_SCRIPT
        + """
def save_checkpoint(model, path):
    torch.save(model.state_dict(), path)

@rank_zero_only
def export(model):
    torch.save(model.state_dict(), "export.pt")
"""
    )
    save = (
        "        if rank == 0:\n            save_checkpoint(model, 'last.pt')\n"
        "        export(model)"
    )
    assert td804(save, source) == []


def test_per_rank_files_and_buffers_are_quiet() -> None:
    save = (
        "        torch.save(shard, f'shard_rank{rank}.pt')\n"
        "        torch.save(shard, os.path.join(out, f'{dist.get_rank()}.pt'))\n"
        "        buffer = io.BytesIO()\n        torch.save(state, buffer)"
    )
    source = "import io\nimport os\n" + DDP_SCRIPT
    assert td804(save, source) == []


def test_a_rank_in_a_name_joined_into_the_path_is_a_per_rank_file() -> None:
    # LlamaGen's FSDP optimizer shards: the rank sits in a file name held in a variable.
    save = (
        "        shard_name = (\n"
        "            f'optimizer.{dist.get_rank():05d}-of-'\n"
        "            f'{dist.get_world_size():05d}.pth'\n"
        "        )\n"
        "        torch.save(shard, os.path.join(out, shard_name))\n"
        "        suffix = f'{rank:03d}.pt'\n"
        "        torch.save(shard, f'{out}/model_{suffix}')\n"
        "        torch.save(shard, Path(out) / shard_name)\n"
        "        tag = f'{dist.get_rank():05d}'\n"
        "        file_name = 'optimizer.' + tag + '.pth'\n"
        "        torch.save(shard, Path(out).joinpath(file_name))"
    )
    source = "import os\nfrom pathlib import Path\n" + DDP_SCRIPT
    assert td804(save, source) == []


def test_a_name_joined_into_the_path_without_a_rank_is_flagged() -> None:
    save = (
        "        name = f'{epoch:05d}.pth'\n"
        "        torch.save(model.state_dict(), os.path.join(out, name))\n"
        "        folder = f'{out}/{epoch}'\n"
        "        torch.save(model.state_dict(), f'{folder}/last.pth')"
    )
    assert td804(save, "import os\n" + DDP_SCRIPT) == [("TD804", 12), ("TD804", 14)]


def test_files_named_after_each_loaded_sample_are_per_sample() -> None:
    # prismer's label generation: each rank writes one file per image of its own shard.
    source = """
import os
import torch
import torch.distributed as dist

def main(model, dataset, out):
    dist.init_process_group("nccl")
    sampler = torch.utils.data.DistributedSampler(dataset)
    loader = torch.utils.data.DataLoader(dataset, sampler=sampler)
    for step, (images, paths) in enumerate(loader):
        features = model(images)
        for k in range(len(paths)):
            parts = paths[k].split("/")
            folder = os.path.join(out, parts[-2])
            torch.save(features[k], os.path.join(folder, parts[-1] + ".pt"))
        for name, feature in zip(paths, features):
            torch.save(feature, f"{out}/{name}.pt")
        torch.save(model.state_dict(), f"{out}/step_{step}.pt")
    for name in ["a", "b"]:
        torch.save(model.state_dict(), f"{out}/{name}.pt")

if __name__ == "__main__":
    main(None, None, "out")
"""
    # the step counter of enumerate(loader), and a name from a literal list, are the
    # same on every rank: those saves still collide
    assert lint_codes(source, "TD804") == [("TD804", 18), ("TD804", 20)]


def test_helpers_nobody_in_the_file_calls_are_quiet() -> None:
    source = """
    import torch
    import torch.distributed as dist
    def save_checkpoint(model, path):
        dist.barrier()
        torch.save(model.state_dict(), path)
    """
    assert lint_codes(source, "TD804", "TD001") == []


def test_programs_that_only_import_torch_distributed_are_quiet() -> None:
    source = """
    import torch
    from torch.distributed.checkpoint import FileSystemReader
    def convert(src, dst):
        torch.save(read(FileSystemReader(src)), dst)
    if __name__ == "__main__":
        convert("a", "b")
    """
    assert lint_codes(source, "TD804", "TD001") == []


def test_a_single_process_entry_point_in_a_distributed_module_is_quiet() -> None:
    source = """
    import torch
    import torch.distributed as dist
    class BroadcastingReader:
        def read(self, tensor):
            dist.broadcast(tensor, src=0)
    def convert(src, dst):
        torch.save(read_all(src), dst)
    if __name__ == "__main__":
        convert("a", "b")
    """
    assert lint_codes(source, "TD804", "TD001") == []


# --- TD805 ------------------------------------------------------------------------------


def td805(source: str) -> list[tuple[str, int]]:
    return lint_codes(source, "TD805", "TD001")


def test_saving_the_ddp_wrapper_state_dict_is_flagged() -> None:
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = Net().cuda()
    model = DDP(model, device_ids=[0])
    torch.save(model.state_dict(), "model.pt")
    """
    (found,) = lint_findings(source, "TD805")
    assert found.location.line == 6 and "`module.`" in found.message
    assert found.fix is not None and found.fix.applicability is Applicability.UNSAFE
    assert found.fix.edits[0].replacement == "model.module"


def test_state_dicts_reached_through_dicts_and_names_are_flagged() -> None:
    source = """
    import torch
    from torch import nn
    def train(net, optimizer):
        model = nn.parallel.DistributedDataParallel(net)
        state = model.state_dict()
        checkpoint = {"optimizer": optimizer.state_dict()}
        checkpoint["model"] = model.state_dict()
        torch.save({"model": state, "epoch": 3}, "a.pt")
        torch.save(checkpoint, "b.pt")
    """
    assert td805(source) == [("TD805", 6), ("TD805", 8)]


def test_data_parallel_and_self_attributes_are_recognised() -> None:
    source = """
    import torch
    class Runner:
        def __init__(self, net):
            self.model = torch.nn.DataParallel(net)
        def save(self):
            torch.save(self.model.state_dict(), "model.pt")
    """
    assert td805(source) == [("TD805", 7)]


def test_a_wrap_only_on_several_devices_is_information_naming_the_test() -> None:
    """`module.` appears only on multi-device runs: a format that depends on the count."""
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Trainer:
        def __init__(self, model, world_size, rank):
            if world_size > 1:
                model = DDP(model, device_ids=[rank])
            self.model = model

        def save(self):
            torch.save({"model": self.model.state_dict()}, "last.pt")

    def run(net, args):
        if torch.cuda.device_count() > 1:
            net = torch.nn.DataParallel(net)
        torch.save(net.state_dict(), "net.pt")

    def always(net, args):
        if args.cuda:
            net = torch.nn.DataParallel(net)
        torch.save(net.state_dict(), "net.pt")

    def evaluate(net):
        net.load_state_dict(torch.load("net.pt"))
    """
    found = {f.location.line: f for f in lint_findings(source, "TD805")}
    assert sorted(found) == [12, 17, 22]
    assert found[12].severity is Severity.INFO and found[17].severity is Severity.INFO
    assert "when `world_size > 1` (line 7)" in found[12].message
    # A wrap on any CUDA run is the normal case, not a multi-device one: still a warning.
    assert found[22].severity is Severity.WARNING


def test_a_module_level_wrap_under_a_device_count_is_information_in_functions() -> None:
    source = """
    import torch

    model = build()
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)

    def save_checkpoint():
        torch.save({"model": model.state_dict()}, "ckpt.pt")

    def save_given(model):
        torch.save(model.state_dict(), "given.pt")
    """
    found = lint_findings(source, "TD805")
    assert [(f.location.line, f.severity) for f in found] == [(9, Severity.INFO)]


def test_the_wrapped_module_state_dict_is_quiet() -> None:
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddp_model = DDP(model)
    torch.save(ddp_model.module.state_dict(), "a.pt")
    torch.save(model.state_dict(), "b.pt")
    model_without_ddp = ddp_model.module
    torch.save({"model": model_without_ddp.state_dict()}, "c.pt")
    """
    assert td805(source) == []


def test_a_round_trip_between_ddp_models_is_quiet() -> None:
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    def test_round_trip(path):
        model = DDP(Net())
        torch.save(model.state_dict(), path)
        other = DDP(Net())
        other.load_state_dict(torch.load(path))
    """
    assert td805(source) == []


_SCRIPT_WITH_RESUME = """
import torch
from torch import nn
model = nn.Linear(4, 2)
{before}
model = torch.nn.DataParallel(model).cuda()
{after}
def valid(epoch):
    checkpoint = {{"epoch": epoch, "state_dict": model.state_dict()}}
    torch.save(checkpoint, "last.pth")
def test(path):
    net = nn.Linear(4, 2)
    net.load_state_dict(torch.load(path)["state_dict"])
"""


def test_a_script_whose_resume_loads_into_the_same_wrapper_is_information() -> None:
    """The script's own resume (module level, another function) loads the checkpoint back
    into the wrapped model: the round trip holds, so the prefix is information."""
    load = 'model.load_state_dict(torch.load("last.pth")["state_dict"])'
    source = _SCRIPT_WITH_RESUME.format(before="", after=load)
    (found,) = lint_findings(source, "TD805")
    assert found.severity is Severity.INFO
    assert "loads its checkpoints back into a wrapped model" in found.message


@pytest.mark.parametrize(
    ("load", "severity"),
    [
        ('utils.copy_state_dict(model, torch.load("last.pth")["state_dict"])', Severity.INFO),
        ('load_checkpoint(model, "last.pth")', Severity.INFO),
        ('log_model(model, "last.pth")', Severity.WARNING),
    ],
)
def test_a_project_loader_handed_the_wrapper_is_a_round_trip(load: str, severity: Severity) -> None:
    """TLlib's re-identification resumes through ``utils.copy_state_dict(model, ...)``
    with ``model`` the DataParallel wrapper: the checkpoints round-trip."""
    source = _SCRIPT_WITH_RESUME.format(before="", after=load)
    (found,) = lint_findings(source, "TD805")
    assert found.severity is severity


def test_a_script_that_loads_before_wrapping_is_still_a_warning() -> None:
    """Loaded into the plain model before the wrap: the prefixed keys break that load."""
    load = 'model.load_state_dict(torch.load("last.pth")["state_dict"])'
    source = _SCRIPT_WITH_RESUME.format(before=load, after="")
    (found,) = lint_findings(source, "TD805")
    assert found.severity is Severity.WARNING


def test_a_state_dict_taken_only_where_the_model_has_no_module_is_quiet() -> None:
    """``if hasattr(model, "module"): model.module.state_dict() else: model.state_dict()``:
    the plain call runs only on an unwrapped model."""
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(Net())
    def save_checkpoint(path, model):
        if hasattr(model, "module"):
            state = model.module.state_dict()
        else:
            state = model.state_dict()
        torch.save({"state_dict": state}, path)
    def save_plain(path, model):
        if not hasattr(model, "module"):
            torch.save(model.state_dict(), path)
    save_checkpoint("a.pt", model)
    save_plain("b.pt", model)
    torch.save(model.state_dict(), "c.pt")
    """
    assert td805(source) == [("TD805", 16)]


def test_a_state_dict_in_the_else_of_an_isinstance_wrapper_test_is_quiet() -> None:
    """YOLOv4's trainer: ``if isinstance(model, nn.DataParallel): ... else:
    torch.save(model.state_dict(), path)`` saves a plain model's keys."""
    source = """
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = nn.DataParallel(Net())
    def save(path, model):
        if isinstance(model, (nn.DataParallel, DDP)):
            torch.save(model.module.state_dict(), path)
        else:
            torch.save(model.state_dict(), path)
        if isinstance(model, Net):
            torch.save(model.state_dict(), path)
    save("a.pt", model)
    """
    assert td805(source) == [("TD805", 12)]


def test_a_state_dict_in_the_else_of_a_conditional_expression_is_quiet() -> None:
    """YOLOP: ``model.module.state_dict() if is_parallel(model) else model.state_dict()``,
    with the project's own wrapper test; a helper that unwraps is no test."""
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(Net())
    def is_parallel(model):
        return type(model) in (torch.nn.DataParallel, DDP)
    def save(path, model):
        state = model.module.state_dict() if is_parallel(model) else model.state_dict()
        torch.save(state, path)
        plain = model.state_dict() if not hasattr(model, "module") else model.module.state_dict()
        torch.save(plain, path)
        torch.save(model.state_dict() if de_parallel(model) else None, path)
    save("a.pt", model)
    """
    assert td805(source) == [("TD805", 12)]


def test_a_branch_whose_other_side_unwraps_the_same_model_is_quiet() -> None:
    """Round 39's MONAI tutorials: the test that picks the branch is the script's own flag
    (``if ddp_bool:``, ``world_size > 1``, ``args.distributed``), and the other branch
    reaches through ``model.module``: the flagged call is the plain model's."""
    source = """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    def train(args, model, world_size):
        ddp_bool = args.gpus > 1
        if ddp_bool:
            model = DDP(model)
        if ddp_bool:
            torch.save(model.module.state_dict(), "a.pt")
        else:
            torch.save(model.state_dict(), "a.pt")
        state = model.module.state_dict() if world_size > 1 else model.state_dict()
        torch.save({"state_dict": state}, "b.pt")
        plain = model.state_dict() if not args.distributed else model.module.state_dict()
        torch.save(plain, "c.pt")
        if args.use_ema:
            torch.save(ema.module.state_dict(), "d.pt")
        else:
            torch.save(model.state_dict(), "d.pt")
    """
    # The last save's other branch unwraps another model: no evidence about this one.
    assert td805(source) == [("TD805", 19)]


def test_a_save_where_the_program_never_wrapped_the_model_is_quiet() -> None:
    """The ``else`` of ``if args.distributed:``, when the model is wrapped only under the
    same kind of test: there it is the plain model. Wrapped unconditionally, the model
    is the wrapper in both branches."""
    source = """
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    def train(args, model, other):
        if args.distributed:
            model = DistributedDataParallel(model)
        other = DistributedDataParallel(other)
        if args.distributed:
            if dist.get_rank() == 0:
                torch.save(model.state_dict(), "a.pt")
        else:
            torch.save(model.state_dict(), "a.pt")
            torch.save(other.state_dict(), "b.pt")
    def single_gpu_or_many(args, net):
        if torch.cuda.device_count() > 1:
            net = torch.nn.DataParallel(net)
        if args.distributed:
            pass
        else:
            torch.save(net.state_dict(), "c.pt")
    """
    # A DataParallel wrap under a device count runs in a single process too: line 21 stays.
    assert [line for _, line in td805(source)] == [11, 14, 21]


def test_files_without_ddp_are_quiet() -> None:
    source = """
    import torch
    model = torch.compile(Net())
    torch.save(model.state_dict(), "a.pt")
    """
    assert td805(source) == []


# --- TD804: a guard's meaning read through flags and functions ---------------------------

FLAG_SCRIPT = """
import torch
import torch.distributed as dist

{helpers}

def main(args, model, loader):
    dist.init_process_group("nccl")
    {flag}
    for epoch in range(10):
        train(model, loader)
        {guard}
            torch.save(model.state_dict(), "last.pt")

if __name__ == "__main__":
    main(parse_args(), build(), loader())
"""
IS_MASTER = "def is_master(args):\n    return args.rank == 0"


def td804_flag(flag: str, guard: str, helpers: str = "") -> list[tuple[str, int]]:
    source = (
        FLAG_SCRIPT.replace("{helpers}", helpers).replace("{flag}", flag).replace("{guard}", guard)
    )
    return lint_codes(source, "TD804", "TD001")


def test_a_save_guarded_by_a_flag_set_from_a_rank_check_is_quiet() -> None:
    flag = 'args.save_logs = args.logs and args.logs != "none" and is_master(args)'
    assert td804_flag(flag, "if args.save_logs:", IS_MASTER) == []
    assert td804_flag("writer = args.rank == 0", "if writer:") == []


def test_a_flag_set_from_a_local_function_returning_a_rank_check_is_quiet() -> None:
    helper = "def should_write(args):\n    return args.rank == 0"
    assert td804_flag("writer = should_write(args)", "if writer:", helper) == []
    assert td804_flag("pass", "if should_write(args):", helper) == []


def test_an_early_continue_on_a_negated_rank_flag_guards_the_save() -> None:
    guard = "if not writer:\n            continue\n        if True:"
    assert td804_flag("writer = args.rank == 0", guard) == []


def test_a_flag_set_from_a_rank_check_in_another_function_guards_the_save() -> None:
    source = """
    import torch
    import torch.distributed as dist
    from training.distributed import is_master

    def main():
        args = parse_args()
        dist.init_process_group("nccl")
        args.save_logs = args.logs and args.logs.lower() != "none" and is_master(args)
        train(args, build())

    def train(args, model):
        for epoch in range(3):
            fit(model)
            if args.save_logs:
                torch.save(model.state_dict(), "last.pt")
            if args.other:
                torch.save(model.state_dict(), "other.pt")

    if __name__ == "__main__":
        main()
    """
    assert [line for _, line in lint_codes(source, "TD804")] == [18]


def test_a_flag_that_is_no_rank_check_still_draws_the_finding() -> None:
    helper = "def should_write(args):\n    return args.logs is not None"
    assert td804_flag("args.save_logs = args.logs is not None", "if args.save_logs:") == [
        ("TD804", 13)
    ]
    assert td804_flag("writer = should_write(args)", "if writer:", helper) == [("TD804", 14)]


_DDP_TRAINER = """
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

def train(net, path):
    model = DDP(net)
    torch.save({"state_dict": model.state_dict()}, path)

def evaluate(net, path):
    net.load_state_dict(torch.load(path)["state_dict"])
"""


@pytest.mark.parametrize(
    "loader",
    [
        'state = {k.replace("module.", ""): v for k, v in ckpt["state_dict"].items()}',
        'state = {k[7:]: v for k, v in ckpt["state_dict"].items() if k.startswith("module")}',
        'consume_prefix_in_state_dict_if_present(ckpt["state_dict"], "module.")',
        'start = 1 if list(ckpt["state_dict"])[0].startswith("module") else 0',
    ],
)
def test_a_project_that_strips_the_prefix_where_it_loads_makes_it_information(
    tmp_path: Path, loader: str
) -> None:
    """Another file of the project strips (or tests) the ``module.`` prefix: its loads
    cope, so the prefixed save is information naming where."""
    (tmp_path / "train.py").write_text(_DDP_TRAINER, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    [found] = report.by_code("TD805")
    assert found.severity is Severity.WARNING
    (tmp_path / "evaluate.py").write_text(
        "import torch\n# strip the 'module.' prefix first\n"
        f"def load(path):\n    ckpt = torch.load(path)\n    {loader}\n",
        encoding="utf-8",
    )
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    [found] = report.by_code("TD805")
    assert found.severity is Severity.INFO
    assert "evaluate.py:5" in found.message


def test_a_seven_character_slice_of_state_dict_keys_is_prefix_handling(tmp_path: Path) -> None:
    """``new_state_dict[k[7:]] = v`` a line or two below a state dict strips ``module.``
    even where no line names it (a fallback after a failed load); a ``[7:]`` slice of
    anything else is no handling."""
    (tmp_path / "train.py").write_text(_DDP_TRAINER, encoding="utf-8")
    (tmp_path / "fid.py").write_text(
        "import torch\nname = 'weights/ema.pt'[7:]\n", encoding="utf-8"
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.WARNING
    (tmp_path / "fid.py").write_text(
        "import torch\n"
        "def load(net, path):\n"
        "    state_dict = torch.load(path)['ema']\n"
        "    try:\n"
        "        net.load_state_dict(state_dict)\n"
        "    except RuntimeError:\n"
        "        stripped = {}\n"
        "        for k, v in state_dict.items():\n"
        "            stripped[k[7:]] = v\n"
        "        net.load_state_dict(stripped)\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.INFO
    assert "fid.py:9" in found.message


def test_a_comment_about_the_prefix_is_no_handling(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        _DDP_TRAINER + "# keys start with 'module.': strip them with k[7:] when loading\n",
        encoding="utf-8",
    )
    report = lint(tmp_path, config=LintConfig(), jobs=1)
    [found] = report.by_code("TD805")
    assert found.severity is Severity.WARNING


def test_prefix_handling_in_an_imported_package_beside_the_training_folder(
    tmp_path: Path,
) -> None:
    """Uformer: ``train/train_denoise.py`` imports ``utils``, a package beside it whose
    ``model_utils.load_checkpoint`` strips ``k[7:]``; a sibling package nobody imports
    does not count."""
    (tmp_path / "train").mkdir()
    (tmp_path / "utils").mkdir()
    (tmp_path / "other").mkdir()
    (tmp_path / "train" / "train_denoise.py").write_text(
        "import utils\n" + _DDP_TRAINER, encoding="utf-8"
    )
    (tmp_path / "utils" / "__init__.py").write_text(
        "from .model_utils import *\n", encoding="utf-8"
    )
    (tmp_path / "other" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "other" / "strip.py").write_text(
        "def load(sd):\n    return {k[7:]: v for k, v in sd.items() if 'module.' in k}\n",
        encoding="utf-8",
    )
    (tmp_path / "utils" / "model_utils.py").write_text(
        "def nothing():\n    pass\n", encoding="utf-8"
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.WARNING
    (tmp_path / "utils" / "model_utils.py").write_text(
        "def load_checkpoint(model, sd):\n"
        "    model.load_state_dict({k[7:] if 'module.' in k else k: v for k, v in sd.items()})\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.INFO
    assert "model_utils.py:2" in found.message


def test_a_save_nothing_in_the_project_loads_back_is_information(tmp_path: Path) -> None:
    """generative-recommenders' research trainer saves the DDP wrapper's state and no
    code of the project reads a checkpoint back: the prefix breaks no load lint can see.
    A loader along the folder line, or in a project module the file imports, makes the
    claim checkable again: a warning."""
    trainer = _DDP_TRAINER.split("def evaluate")[0]
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train.py").write_text("import tools\n" + trainer, encoding="utf-8")
    (tmp_path / "train" / "data.py").write_text(
        "import numpy as np\ndef read(path):\n    return np.load(path)\n", encoding="utf-8"
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.INFO
    assert "nothing in the project loads a checkpoint back" in found.message
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text(
        "import torch\ndef restore(net, path):\n    net.load_state_dict(torch.load(path))\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.WARNING
    (tmp_path / "tools" / "__init__.py").unlink()
    (tmp_path / "evaluate.py").write_text(
        "from safetensors.torch import load_file\nweights = load_file('model.safetensors')\n",
        encoding="utf-8",
    )
    [found] = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD805")
    assert found.severity is Severity.WARNING


_ENV = """
import torch.distributed as dist


def init_dist(opt):
    dist.init_process_group(backend="nccl", world_size=opt.world_size, rank=opt.rank)
    {setting}
"""
_TRAIN_SCRIPT = """
import torch
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from hybrid.utils.env import init_dist


def main_worker(gpu, opt, model, loader, optimizer):
    init_dist(opt)
    model = DistributedDataParallel(model.cuda(gpu), device_ids=[gpu])
    for epoch in range(10):
        for x in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        if opt.log:
            torch.save(model.module.state_dict(), f"model_{epoch}.pth")
    torch.save(model.module.state_dict(), "final.pth")


def main(opt, model, loader, optimizer):
    if opt.launcher == "slurm":
        main_worker(None, opt, model, loader, optimizer)
    else:
        mp.spawn(main_worker, nprocs=4, args=(opt, model, loader, optimizer))


if __name__ == "__main__":
    main(None, None, None, None)
"""


@pytest.mark.parametrize(
    ("setting", "guarded"),
    [
        # HybrIK's init_dist, in a module of a namespace package (no __init__.py at its
        # top): opt.log is true on the first process of each node only
        (
            "if opt.rank % opt.ngpus_per_node == 0:\n        opt.log = True\n    else:\n"
            "        opt.log = False",
            True,
        ),
        ("opt.log = opt.rank == 0", True),
        # set true on every rank: the save runs everywhere
        ("opt.log = True", False),
    ],
)
def test_a_flag_another_module_sets_on_rank_zero_guards_the_save(
    tmp_path: Path, setting: str, guarded: bool
) -> None:
    (tmp_path / "hybrid" / "utils").mkdir(parents=True)
    (tmp_path / "hybrid" / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "hybrid" / "utils" / "env.py").write_text(
        _ENV.format(setting=setting), encoding="utf-8"
    )
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.py").write_text(_TRAIN_SCRIPT, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD804", "TD001")), jobs=1)
    lines = [f.location.line for f in report.findings]
    # the final save after the loop has no guard: every rank writes it
    assert lines == ([19] if guarded else [18, 19])


_UTIL = """
import torch.distributed as dist


def is_first_worker():
    return {returned}
"""
_ANCE_TRAINER = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from utils.util import is_first_worker


def save_checkpoint(model):
    if is_first_worker():
        torch.save(model.module.state_dict(), "final.pt")


def train(args, model, loader, optimizer):
    dist.init_process_group("nccl")
    model = DistributedDataParallel(model.cuda(), device_ids=[args.local_rank])
    for step, x in enumerate(loader):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        if is_first_worker() and step % 1000 == 0:
            torch.save(optimizer.state_dict(), "optimizer.pt")
    save_checkpoint(model)


if __name__ == "__main__":
    train(None, None, None, None)
"""


@pytest.mark.parametrize(
    ("returned", "guarded"),
    [
        # ANCE's utils/util.py: true on rank 0, or in a single process
        ("not dist.is_available() or not dist.is_initialized() or dist.get_rank() == 0", True),
        ("dist.get_rank() == 0", True),
        # true on every rank of a distributed run: no guard
        ("dist.is_initialized()", False),
    ],
)
def test_a_rank_test_imported_from_another_module_guards_the_save(
    tmp_path: Path, returned: str, guarded: bool
) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "utils" / "util.py").write_text(_UTIL.format(returned=returned), "utf-8")
    (tmp_path / "drivers").mkdir()
    (tmp_path / "drivers" / "run_ann.py").write_text(_ANCE_TRAINER, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD804", "TD001")), jobs=1)
    lines = [f.location.line for f in report.findings]
    assert lines == ([] if guarded else [11, 22])


def test_a_worker_started_by_mp_spawn_is_reached_from_the_spawn() -> None:
    """``mp.spawn(main_worker, ...)`` runs main_worker in every process: its unguarded
    saves are every rank's, and a rank check around the spawn (none here) would count."""
    source = _TRAIN_SCRIPT.replace(
        '    if opt.launcher == "slurm":\n'
        "        main_worker(None, opt, model, loader, optimizer)\n"
        "    else:\n        mp.spawn(",
        "    mp.spawn(",
    ).replace("            torch.save(model.module.state_dict(), f", "            print(f")
    assert lint_codes(source.replace("if opt.log:", "if True:"), "TD804", "TD001") == [
        ("TD804", 19)
    ]


DEFAULT_GPU = """
import torch
import torch.distributed as dist

def main(args, model):
    dist.init_process_group("nccl")
    default_gpu = False
    if dist.is_available() and args.local_rank != -1:
        rank = dist.get_rank()
        if rank == 0:
            default_gpu = True
    else:
        default_gpu = True
    {extra}
    for epoch in range(10):
        train(epoch)
        if default_gpu:
            torch.save(model.state_dict(), "model.bin"){mark}

if __name__ == "__main__":
    main(parse_args(), build())
"""


def test_a_flag_set_true_on_rank_zero_or_in_a_single_process_guards_the_save() -> None:
    """ViLBERT's `default_gpu`: False, then True under `rank == 0` when launched per GPU
    (`args.local_rank != -1`), and True when not distributed. Set true anywhere else, it
    guards nothing."""
    assert_marked(DEFAULT_GPU.format(extra="", mark=""), "TD804")
    anywhere = DEFAULT_GPU.format(extra="default_gpu = args.verbose", mark="  # expect: TD804")
    assert_marked(anywhere, "TD804")


def test_a_flag_set_under_a_test_of_itself_is_no_guard_and_no_loop() -> None:
    """`if flag: flag = True` asks about the flag again: read as no rank check, without
    following it round."""
    source = DEFAULT_GPU.format(extra="if default_gpu:\n        default_gpu = True", mark="")
    source = source.replace(
        '            torch.save(model.state_dict(), "model.bin")',
        '            torch.save(model.state_dict(), "model.bin")  # expect: TD804',
    )
    assert_marked(source, "TD804", "TD001")


_ONLINE_EVAL = """
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def online_eval(model, loader, gpu, args):
    measures = torch.zeros(9, device=gpu)
    for x in loader:
        measures += model(x).detach()
    if args.multiprocessing_distributed:
        dist.all_reduce(measures)
    {returns}


def main_worker(gpu, args, model, loader, optimizer):
    dist.init_process_group("nccl", rank=gpu, world_size=args.world_size)
    model = DistributedDataParallel(model.cuda(gpu), device_ids=[gpu])
    for step, x in enumerate(loader):
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        if step % 1000 == 0:
            eval_measures = online_eval(model, loader, gpu, args)
            if eval_measures is not None:
                torch.save(model.state_dict(), f"best_{{step}}.pt")


if __name__ == "__main__":
    main_worker(0, None, None, None, None)
"""


@pytest.mark.parametrize(
    ("returns", "flagged"),
    [
        # NeWCRFs: the measures come back only where the process evaluated, None elsewhere
        (
            "if not args.multiprocessing_distributed or gpu == 0:\n"
            "        return measures.cpu()\n    return None",
            False,
        ),
        # every rank gets them: the test guards nothing
        ("return measures.cpu()", True),
        ("if args.verbose:\n        return measures.cpu()\n    return None", True),
    ],
)
def test_a_result_only_rank_zero_gets_back_guards_the_save(returns: str, flagged: bool) -> None:
    source = _ONLINE_EVAL.format(returns=returns)
    assert [code for code, _ in lint_codes(source, "TD804")] == (["TD804"] if flagged else [])


_NAMED_BY_BRANCH = """
import torch
from torch import nn

def train(config, model):
    if config.get("parallel"):
        model = nn.DataParallel(model)
    for epoch in range(3):
{naming}
        torch.save({{"model_sd": model_.state_dict()}}, "epoch-last.pth")
"""


@pytest.mark.parametrize(
    ("naming", "flagged"),
    [
        # few-shot-meta-baseline: the plain name is bound where the other branch unwraps
        (
            "        if config.get('parallel'):\n            model_ = model.module\n"
            "        else:\n            model_ = model",
            False,
        ),
        ("        model_ = model.module if config.get('parallel') else model", False),
        # no split: the wrapper's keys are saved
        ("        model_ = model", True),
        (
            "        if epoch > 1:\n            model_ = model\n"
            "        else:\n            model_ = model",
            True,
        ),
    ],
)
def test_td805_a_name_bound_in_the_branch_beside_an_unwrap_is_plain(
    naming: str, flagged: bool
) -> None:
    found = td805(_NAMED_BY_BRANCH.format(naming=naming))
    assert bool(found) is flagged, found


_TEMPLATE_LOG_LINE = """
import argparse
import logging
import torch

logger = logging.getLogger(__name__)


def train(args, model):
    logger.info(
        "total batch size = %d",
        args.batch_size * (torch.distributed.get_world_size() if args.local_rank != -1 else 1),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    {setup}
    model = torch.nn.Linear(2, 2)
    train(args, model)
    torch.save(args, "training_args.bin")


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize(
    ("setup", "flagged"),
    [
        # Bert-Multi-Label: a template's world-size query in a log line is all there is
        ("pass", False),
        ("from tools.misc import set_seed", False),
        # the program starts the processes: the query is real evidence
        ("torch.distributed.init_process_group('nccl')", True),
        ("from lib.dist import init_distributed_mode\n    init_distributed_mode(args)", True),
    ],
)
def test_td804_a_rank_query_alone_is_no_distributed_program(
    tmp_path: Path, setup: str, flagged: bool
) -> None:
    for package in ("lib", "tools"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "tools" / "misc.py").write_text(
        "import torch\n\ndef set_seed(s):\n    torch.manual_seed(s)\n", encoding="utf-8"
    )
    (tmp_path / "lib" / "dist.py").write_text(
        "import torch\n\ndef init_distributed_mode(args):\n"
        "    if args.local_rank != -1:\n"
        "        torch.distributed.init_process_group('nccl')\n",
        encoding="utf-8",
    )
    (tmp_path / "app").mkdir()
    train = tmp_path / "app" / "train.py"
    train.write_text(_TEMPLATE_LOG_LINE.format(setup=setup), encoding="utf-8")
    found = lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD804")
    assert bool(found) is flagged


_CONVERSION_SCRIPT = """
import argparse
import torch

{binding}
torch.distributed.init_process_group(backend="gloo", init_method="tcp://127.0.0.1:16666", {size})
model = torch.nn.Linear(2, 2)
{more}
torch.save({{"module": model.state_dict()}}, "output.pt")
"""


@pytest.mark.parametrize(
    ("binding", "size", "more", "flagged"),
    [
        # SwissArmyTransformer's weight conversion: a process group of one process
        (
            "args = argparse.Namespace(world_size=1, rank=0)",
            "world_size=args.world_size, rank=args.rank",
            "",
            False,
        ),
        ("", "world_size=1, rank=0", "", False),
        # several processes, or not shown to be one
        (
            "args = argparse.Namespace(world_size=2, rank=0)",
            "world_size=args.world_size, rank=args.rank",
            "",
            True,
        ),
        ("args = parse()", "world_size=args.world_size, rank=args.rank", "", True),
        (
            "",
            "world_size=1, rank=0",
            "model = torch.nn.parallel.DistributedDataParallel(model)",
            True,
        ),
    ],
)
def test_td804_a_process_group_of_one_is_one_process(
    binding: str, size: str, more: str, flagged: bool
) -> None:
    source = _CONVERSION_SCRIPT.format(binding=binding, size=size, more=more)
    assert bool(lint_codes(source, "TD804")) is flagged


def test_td804_a_namespace_of_one_from_the_imported_config(tmp_path: Path) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "config" / "vit_config.py").write_text(
        "import argparse\nargs = argparse.Namespace(num_layers=12, world_size=1, rank=0)\n",
        encoding="utf-8",
    )
    (tmp_path / "convert.py").write_text(
        "import torch\nfrom config.vit_config import args\n"
        "torch.distributed.init_process_group(backend='gloo', world_size=args.world_size,"
        " rank=args.rank)\n"
        "torch.save(torch.nn.Linear(2, 2).state_dict(), 'output.pt')\n",
        encoding="utf-8",
    )
    assert lint(tmp_path, config=LintConfig(), jobs=1).by_code("TD804") == []


_RANK0_DECORATOR = """
import functools
import torch.distributed as dist


def rank0(func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if {test}:
            return func(*args, **kwargs)

    return wrapper
"""

_DECORATED_SAVE = """
import torch
import torch.distributed as dist
from utils import rank0


@rank0
def save_state(model, path):
    torch.save(model.state_dict(), path)


def main(model):
    dist.init_process_group("nccl")
    for epoch in range(3):
        save_state(model, f"epoch_{epoch}.pt")


if __name__ == "__main__":
    main(None)
"""


@pytest.mark.parametrize(
    ("test", "flagged"),
    [
        # physicsnemo's @rank0: the wrapper calls the function only on rank 0
        ("dist.get_rank() == 0", False),
        ("DistributedManager().rank == 0", False),
        # a wrapper that runs it everywhere, or only off rank 0, is no guard
        ("True", True),
        ("dist.get_rank() != 0", True),
    ],
)
def test_td804_a_project_decorator_that_runs_the_function_on_rank_zero_only(
    tmp_path: Path, test: str, flagged: bool
) -> None:
    (tmp_path / "utils.py").write_text(_RANK0_DECORATOR.format(test=test), encoding="utf-8")
    (tmp_path / "train.py").write_text(_DECORATED_SAVE, encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(), select=["TD804"], jobs=1)
    assert bool(report.findings) is flagged, report.findings
    # the decorator defined in the same file counts the same way
    local = _DECORATED_SAVE.replace("from utils import rank0\n", _RANK0_DECORATOR.format(test=test))
    assert bool(lint_codes(local, "TD804")) is flagged
