"""TD905 incomplete-resume-checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.static.helpers import lint_codes, lint_findings
from torchdoctor.static import LintConfig, lint

TRAIN = """
import torch
from torch import nn

def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    for epoch in range(100):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        scheduler.step()
{save}

def resume(path):
    return torch.load(path)
"""


def td905(save: str) -> list[tuple[str, int]]:
    return lint_codes(TRAIN.format(save=save), "TD905", "TD001")


def test_a_resume_checkpoint_without_the_optimizer_is_flagged() -> None:
    save = (
        '        torch.save({"model": model.state_dict(), "epoch": epoch,\n'
        '                    "scheduler": scheduler.state_dict()}, "last.pt")'
    )
    (found,) = lint_findings(TRAIN.format(save=save), "TD905")
    assert found.location.line == 15
    assert found.evidence["missing"] == ["optimizer"] and "loss spike" in found.message


def test_each_missing_part_is_named() -> None:
    save = '        torch.save({"model_state_dict": model.state_dict(), "step": epoch}, "a.pt")'
    (found,) = lint_findings(TRAIN.format(save=save), "TD905")
    assert found.evidence["missing"] == ["optimizer", "scheduler"]


def test_a_dict_built_step_by_step_is_read_whole() -> None:
    save = (
        '        state = {"net": model.state_dict()}\n'
        '        state["opt"] = optimizer.state_dict()\n'
        '        torch.save(state, "a.pt")'
    )
    (found,) = lint_findings(TRAIN.format(save=save), "TD905")
    assert found.location.line == 17 and found.evidence["missing"] == ["scheduler", "counter"]


def test_a_complete_checkpoint_is_quiet() -> None:
    save = (
        '        torch.save({"model": model.state_dict(),\n'
        '                    "optimizer": optimizer.state_dict(),\n'
        '                    "scheduler": scheduler.state_dict(), "epoch": epoch}, "a.pt")\n'
        "        torch.save(dict(model=model.state_dict(), optim=optimizer.state_dict(),\n"
        '                        sched=scheduler.state_dict(), epoch=epoch), "b.pt")'
    )
    assert td905(save) == []


def test_a_counter_read_back_from_an_entry_of_another_name_is_kept() -> None:
    """PyTorch3D's NeRF: the epoch lives in a pickled stats object saved under "stats",
    and the resume sets ``start_epoch = stats.epoch`` from it. A key the resume never
    reads a counter from does not count."""
    source = """
import pickle
import torch
from torch import nn

def main(resume, path):
    model = nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    stats, start_epoch = Stats(), 0
    if resume:
        loaded = torch.load(path, weights_only=True)
        model.load_state_dict(loaded["model"])
        optimizer.load_state_dict(loaded["optimizer"])
        stats = pickle.loads(loaded["stats"])
        start_epoch = stats.epoch
    for epoch in range(start_epoch, 100):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        stats.epoch = epoch
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "stats": pickle.dumps(stats)}, path)
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "notes": pickle.dumps(stats)}, "other.pt")
"""
    assert lint_codes(source, "TD905") == [("TD905", 24)]


def test_parts_kept_in_a_nested_dict_count() -> None:
    """Counters (or states) kept under a sub-dict of the checkpoint are in it."""
    save = (
        '        ckpt = {"counters": {"t": None, "epoch": None}, "g_state": None,\n'
        '                "optim": {"g": None, "sched": None}}\n'
        '        ckpt["counters"]["epoch"] = epoch\n'
        '        ckpt["g_state"] = model.state_dict()\n'
        '        ckpt["optim"]["g"] = optimizer.state_dict()\n'
        '        ckpt["optim"]["sched"] = scheduler.state_dict()\n'
        '        torch.save(ckpt, "a.pt")'
    )
    assert td905(save) == []


def test_weight_exports_are_quiet() -> None:
    save = (
        '        torch.save(model.state_dict(), "best.pt")\n'
        '        torch.save({"model": model.state_dict()}, "export.pt")\n'
        '        torch.save({"model": model.state_dict(), "config": cfg}, "release.pt")'
    )
    assert td905(save) == []


def test_dicts_lint_cannot_see_whole_are_quiet() -> None:
    save = (
        '        torch.save({**extra, "model": model.state_dict(), "epoch": epoch}, "a.pt")\n'
        '        torch.save(make_state(model, epoch), "b.pt")'
    )
    assert td905(save) == []


def test_a_final_save_after_training_needs_no_epoch() -> None:
    source = (
        TRAIN.format(save="")
        + """
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict()}, "final.pt")
"""
    )
    assert lint_codes(source, "TD905", "TD001") == []


def test_a_program_without_a_scheduler_needs_none() -> None:
    source = """
    import torch
    for epoch in range(3):
        for x in loader:
            optimizer.zero_grad()
            model(x).backward()
            optimizer.step()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "epoch": epoch}, "a.pt")
    """
    assert lint_codes(source, "TD905", "TD001") == []


def test_plain_sgd_has_no_state_to_lose() -> None:
    source = """
    import torch
    def train(model, loader, momentum):
        plain = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(3):
            for x in loader:
                plain.zero_grad()
                model(x).backward()
                plain.step()
            torch.save({"model": model.state_dict(), "epoch": epoch}, "a.pt")
    """
    assert lint_codes(source, "TD905", "TD001") == []
    with_momentum = source.replace("lr=0.1)", "lr=0.1, momentum=0.9)") + (
        "def resume(model):\n        model.load_state_dict(torch.load('a.pt'))\n"
    )
    assert lint_codes(with_momentum, "TD905", "TD001") == [("TD905", 10)]


def test_an_optimizer_rebuilt_every_epoch_has_no_state_to_resume() -> None:
    """TLlib's clustering re-identification: each epoch re-clusters, resizes the head and
    builds a new Adam, so no optimizer state outlives an epoch. Built once, it is
    missed."""
    source = """
    import torch
    def train(model, loader, cluster):
        for epoch in range(40):
            head = cluster(model)
            optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)
            for x in loader:
                optimizer.zero_grad()
                model(x).sum().backward()
                optimizer.step()
            torch.save({"model": model.state_dict(), "epoch": epoch}, "last.pt")
    def resume(model):
        model.load_state_dict(torch.load("last.pt")["model"])
    """
    assert lint_codes(source, "TD905", "TD001") == []
    built_once = source.replace(
        "        for epoch in range(40):\n            head = cluster(model)\n"
        "            optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)\n",
        "        optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)\n"
        "        for epoch in range(40):\n            head = cluster(model)\n",
    )
    assert built_once != source
    assert lint_codes(built_once, "TD905", "TD001") == [("TD905", 11)]
    per_stage = """
    import torch
    def train(model, loader, stages):
        for stage in stages:
            optimizer = torch.optim.Adam(model.parameters(), lr=stage.lr)
            for epoch in range(stage.epochs):
                for x in loader:
                    optimizer.zero_grad()
                    model(x).sum().backward()
                    optimizer.step()
                torch.save({"model": model.state_dict(), "epoch": epoch}, "last.pt")
    def resume(model):
        model.load_state_dict(torch.load("last.pt")["model"])
    """
    assert lint_codes(per_stage, "TD905", "TD001") == [("TD905", 11)]


# --- no resume to be incomplete, or a scheduler positioned from the saved epoch ----------

SCRIPT = """
import torch
from torch import nn

def main(args, loader):
    model = nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    start_epoch = 0
{resume}
    for epoch in range(start_epoch, 100):
        for x, y in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        scheduler.step()
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "epoch": epoch}, "last.pt")
"""
RESUME = """    if args.resume:
        checkpoint = torch.load(args.resume)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"] + 1
"""


def script(resume: str) -> str:
    return SCRIPT.replace("{resume}", resume)


def test_a_scheduler_positioned_from_the_saved_epoch_is_restored() -> None:
    positioned = RESUME + "        scheduler.last_epoch = start_epoch - 1\n"
    assert lint_codes(script(positioned), "TD905") == []


@pytest.mark.parametrize(
    "built",
    [
        "StepLR(optimizer, 10, last_epoch=start_epoch - 1)",
        "StepLR(optimizer, 10, 0.1, start_epoch - 1)",
    ],
    ids=["keyword", "positional"],
)
def test_a_scheduler_built_at_the_saved_epoch_is_restored(built: str) -> None:
    source = script(RESUME).replace("StepLR(optimizer, 10)", built)
    assert lint_codes(source, "TD905") == []


def test_a_scheduler_built_at_a_constant_position_is_no_restore() -> None:
    source = script(RESUME).replace("StepLR(optimizer, 10)", "StepLR(optimizer, 10, 0.1, -1)")
    assert [code for code, _ in lint_codes(source, "TD905")] == ["TD905"]


def test_a_resume_that_forgets_the_scheduler_is_still_flagged() -> None:
    (found,) = lint_findings(script(RESUME), "TD905")
    assert found.evidence["missing"] == ["scheduler"]


def test_a_program_that_never_resumes_is_quiet() -> None:
    assert lint_codes(script(""), "TD905") == []


# Round 5's DiT (saves model, EMA and optimizer; nothing resumes: its only "load" is a
# DataLoader) and I-JEPA (replays its schedules' step() after loading).


def test_a_data_loader_or_a_download_is_not_a_resume() -> None:
    source = script("").replace(
        "def main(args, loader):",
        "def main(args, dataset):\n    loader = torch.utils.data.DataLoader(dataset)\n"
        "    download_weights(args.url)",
    )
    assert lint_codes(source, "TD905") == []
    assert lint_codes(source + "\ndef resume(path):\n    return torch.load(path)\n", "TD905")


# Round 39's eeg-gcnn: per-epoch checkpoints with the optimizer, and no resume; its only
# loads read feature arrays, through joblib and a helper of the file that wraps it.
DATA_READERS = """
import numpy as np
from joblib import dump, load

def _load_memory_mapped_array(name):
    dump(load(name), name)
    return load(name, mmap_mode="r")

def read_features():
    return _load_memory_mapped_array("x"), np.load("y.npy")
"""


def test_loads_of_data_arrays_are_not_a_resume() -> None:
    assert lint_codes(script("") + DATA_READERS, "TD905") == []
    # A helper of the file that reads a checkpoint is still a resume.
    helper = DATA_READERS.replace('load(name, mmap_mode="r")', "torch.load(name)")
    assert lint_codes(script("") + helper, "TD905")


def test_a_lua_torch_file_read_by_torchfile_is_not_a_resume() -> None:
    """AesPA-Net reads its pretrained VGG with ``torchfile.load("vgg.t7")``, a format
    ``torch.save`` never writes: no checkpoint of the run comes back. A reader of the
    project's own that may call ``torch.load`` still may resume."""
    pretrained = (
        '\nimport torchfile\n\ndef vgg():\n    return torchfile.load("vgg_normalised.t7")\n'
    )
    assert lint_codes(script("") + pretrained, "TD905") == []
    helper = pretrained.replace("torchfile.load(", "load_checkpoint(") + (
        "\ndef load_checkpoint(path):\n    return torch.load(path)\n"
    )
    assert lint_codes(script("") + helper, "TD905")


REPLAYED = {
    "loop after the load": RESUME + "    for _ in range(start_epoch * len(loader)):\n"
    "        scheduler.step()\n",
    "several schedules and a generator": RESUME + "        for _ in range(start_epoch):\n"
    "            scheduler.step()\n            wd_scheduler.step()\n"
    "            next(momentum_schedule)\n",
}


def test_schedules_replayed_by_step_after_a_resume_are_restored() -> None:
    for shape, resume in REPLAYED.items():
        assert lint_codes(script(resume), "TD905") == [], shape


def test_a_trainer_class_replaying_its_schedule_in_a_helper_is_restored() -> None:
    source = """
    import torch

    class Trainer:
        def __init__(self, model, loader):
            self.model, self.loader = model, loader
            self.optimizer = torch.optim.Adam(model.parameters())
            self.scheduler = torch.optim.lr_scheduler.StepLR(self.optimizer, 10)
            self.epoch = 0

        def resume(self, path):
            state = torch.load(path)
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.epoch = state["epoch"]
            for _ in range(self.epoch):
                self.scheduler.step()

        def fit(self, epochs):
            for epoch in range(self.epoch, epochs):
                for x in self.loader:
                    self.optimizer.zero_grad()
                    self.model(x).sum().backward()
                    self.optimizer.step()
                self.scheduler.step()
                torch.save({"model": self.model.state_dict(),
                            "optimizer": self.optimizer.state_dict(), "epoch": epoch}, "c.pt")
    """
    assert lint_codes(source, "TD905") == []
    forgotten = source.replace(
        "for _ in range(self.epoch):\n                self.scheduler.step()", "pass"
    )
    assert lint_codes(forgotten, "TD905") == [("TD905", 25)]


def test_a_closure_training_loop_with_a_schedule_is_not_a_replay() -> None:
    source = script(RESUME).replace(
        "    for epoch in range(start_epoch, 100):",
        "    for x in loader:\n        optimizer.step(closure)\n        scheduler.step()\n"
        "    for epoch in range(start_epoch, 100):",
    )
    (found,) = lint_findings(source, "TD905")
    assert found.evidence["missing"] == ["scheduler"]


# A checkpoint read back only for its weights (a pre-trained model to fine-tune) is no
# resume: nothing would read the optimizer, the schedule or the counter back.
SAVE = '        torch.save({"model": model.state_dict(), "epoch": epoch}, "pretrain.pt")'


def test_a_checkpoint_read_back_only_for_its_weights_is_no_resume() -> None:
    reads = [
        "def finetune(net, path):\n"
        "    ckpt = torch.load(path)\n"
        '    state = {k.removeprefix("model."): v for k, v in ckpt["model"].items()}\n'
        "    net.load_state_dict(state, strict=False)\n",
        "def finetune(net, path):\n    net.load_state_dict(torch.load(path))\n",
        'def finetune(net, path):\n    net.load_state_dict(torch.load(path)["state_dict"])\n',
    ]
    for read in reads:
        source = TRAIN.format(save=SAVE).replace(
            "def resume(path):\n    return torch.load(path)\n", read
        )
        assert lint_codes(source, "TD905", "TD001") == [], read


def test_values_beside_the_weights_and_presence_checks_are_no_resume() -> None:
    """Round 40's MONAI tutorials: a ControlNet initialised from a diffusion checkpoint
    that also reads its ``scale_factor``; a federated learner that checks ``if
    model_data:`` before taking the weights; image and config loaders beside them."""
    reads = [
        "def init(net, path):\n"
        "    ckpt = torch.load(path)\n"
        '    net.load_state_dict(ckpt["unet_state_dict"])\n'
        '    return ckpt["scale_factor"]\n',
        "def best(path):\n"
        "    model_data = torch.load(path)\n"
        "    if model_data:\n"
        '        return model_data["model_weights"]\n'
        "    if model_data is None:\n"
        "        return None\n",
        "from monai.transforms import LoadImaged\n"
        "def init(net, path, args):\n"
        "    config = load_config(args.config)\n"
        '    reader = LoadImaged(keys=["image"])\n'
        '    net.load_state_dict(torch.load(path)["model"])\n',
    ]
    for read in reads:
        source = TRAIN.format(save=SAVE).replace(
            "def resume(path):\n    return torch.load(path)\n", read
        )
        assert lint_codes(source, "TD905", "TD001") == [], read
    # Reading the optimizer, the epoch or the AMP scaler back is a resume.
    for key in ("optimizer", "epoch", "scaler"):
        source = TRAIN.format(save=SAVE).replace(
            "def resume(path):\n    return torch.load(path)\n",
            reads[0].replace('"scale_factor"', f'"{key}"'),
        )
        assert lint_codes(source, "TD905", "TD001"), key


def test_an_initialising_load_that_only_prints_the_saved_step_is_no_resume() -> None:
    """AnimateDiff's shape: the path name is reused for the loaded dict, the dict is
    asked what it holds (``"step" in ckpt``), its step is only printed, the weights are
    either under a key or the whole file, and the settings come from ``OmegaConf.load``:
    nothing restores the run. Restoring the step (a resume) is flagged."""
    read = (
        "from omegaconf import OmegaConf\n"
        "def finetune(net, ckpt_path, config):\n"
        "    settings = OmegaConf.load(config)\n"
        '    if ckpt_path != "":\n'
        '        print(f"from checkpoint: {ckpt_path}")\n'
        "        ckpt_path = torch.load(ckpt_path)\n"
        '        if "epoch" in ckpt_path: print(f"epoch: {ckpt_path[\'epoch\']}")\n'
        '        state = ckpt_path["model"] if "model" in ckpt_path else ckpt_path\n'
        "        net.load_state_dict(state, strict=False)\n"
        "    return settings\n"
    )
    source = TRAIN.format(save=SAVE).replace(
        "def resume(path):\n    return torch.load(path)\n", read
    )
    assert lint_codes(source, "TD905", "TD001") == []
    restored = source.replace("    return settings\n", '    return settings, ckpt_path["epoch"]\n')
    assert [code for code, _ in lint_codes(restored, "TD905")] == ["TD905"]


def test_a_read_back_of_the_counter_is_a_resume() -> None:
    read = (
        "def restore(net, path):\n"
        "    ckpt = torch.load(path)\n"
        '    net.load_state_dict(ckpt["model"])\n'
        '    return ckpt["epoch"]\n'
    )
    source = TRAIN.format(save=SAVE).replace(
        "def resume(path):\n    return torch.load(path)\n", read
    )
    assert [code for code, _ in lint_codes(source, "TD905")] == ["TD905"]


_FULL_STATE = (
    '{"model": model.state_dict(), "optimizer": optimizer.state_dict(), '
    '"scheduler": scheduler.state_dict()}'
)


def test_a_file_name_formatted_from_the_loops_counter_keeps_the_count() -> None:
    """``"{}.pth".format(step)``, ``f"{epoch}.pt"``: the count lives in the file name, which
    the resume reads back (``--restore_step``); only the state left out is reported."""
    for path in (
        '"ckpt/{}.pth.tar".format(epoch)',
        'f"ckpt/{epoch:06d}.pt"',
        "str(epoch).zfill(6) + '.pt'",
    ):
        assert td905(f"        torch.save({_FULL_STATE}, {path})") == [], path
    save = (
        '        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},'
        ' f"ckpt/{epoch}.pt")'
    )
    (found,) = lint_findings(TRAIN.format(save=save), "TD905")
    assert found.evidence["missing"] == ["scheduler"]


def test_a_fixed_or_unrelated_file_name_does_not_keep_the_count() -> None:
    for path in ('"last.pt"', 'f"{run_name}.pt"'):
        save = f"        torch.save({_FULL_STATE}, {path})"
        (found,) = lint_findings(TRAIN.format(save=save), "TD905")
        assert found.evidence["missing"] == ["counter"]


def test_a_model_loaded_by_a_project_helper_is_no_resume() -> None:
    """YOLOv5's classifier: ``model = attempt_load(weights)`` reads a model to fine-tune,
    not a run's state, and nothing else reads a checkpoint back: its saves are exports."""
    save = '        torch.save({"model": model.state_dict(), "epoch": epoch}, "last.pt")'
    source = (
        TRAIN.format(save=save)
        .replace(
            "def resume(path):\n    return torch.load(path)\n",
            "def build(weights):\n    model = attempt_load(weights)\n    return model\n",
        )
        .replace("import torch\n", "import torch\nfrom models import attempt_load\n", 1)
    )
    assert lint_codes(source, "TD905", "TD001") == []
    state = source.replace("model = attempt_load", "state = attempt_load").replace(
        "return model", "return state"
    )
    assert lint_codes(state, "TD905", "TD001") != []


def test_a_scheduler_stepped_with_the_epoch_is_positioned_by_it() -> None:
    """Fast AutoAugment: ``scheduler.step(epoch - 1 + step / total)`` sets the schedule's
    position from the epoch, which the checkpoint keeps; a plateau scheduler stepped with
    a metric still needs its state."""
    save = (
        '        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),'
        ' "epoch": epoch}, "last.pt")'
    )
    positioned = TRAIN.replace("scheduler.step()", "scheduler.step(epoch - 1 + 0.5)")
    assert lint_codes(positioned.format(save=save), "TD905", "TD001") == []
    # LION's trainer: `scheduler.step(epoch=epoch)`, the epoch given by keyword
    keyword = TRAIN.replace("scheduler.step()", "scheduler.step(epoch=epoch)")
    assert lint_codes(keyword.format(save=save), "TD905", "TD001") == []
    metric = TRAIN.replace("scheduler.step()", "scheduler.step(val_loss)")
    assert lint_codes(metric.format(save=save), "TD905", "TD001") != []


def test_an_optimizer_saved_to_its_own_file_is_kept() -> None:
    """DeepSDF: ``save_model`` writes the weights and epoch, ``save_optimizer`` the
    optimizer's state beside them; the run's state is all on disk. Without the second
    save the same checkpoint is still flagged."""
    helpers = """
import torch
from torch import nn

def save_model(path, decoder, epoch):
    torch.save({"epoch": epoch, "model_state_dict": decoder.state_dict()}, path)

def save_optimizer(path, optimizer, epoch):
    torch.save({"epoch": epoch, "optimizer_state_dict": optimizer.state_dict()}, path)

def save_scheduler(path, scheduler):
    torch.save(scheduler.state_dict(), path)

def main():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)
    for epoch in range(10):
        for x in loader:
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
        scheduler.step()
        save_model("model.pth", model, epoch)
{more}

def resume(path):
    return torch.load(path)
"""
    both = (
        '        save_optimizer("optimizer.pth", optimizer, epoch)\n'
        '        save_scheduler("scheduler.pth", scheduler)'
    )
    assert lint_codes(helpers.replace("{more}", both), "TD905") == []
    (found,) = lint_findings(helpers.replace("{more}", ""), "TD905")
    assert found.location.line == 6


def test_a_trainer_that_steps_no_optimizer_needs_none_in_its_checkpoint() -> None:
    """RecBole: a decision-tree trainer's checkpoint holds no optimizer, while the torch
    trainer beside it in the same file does; a subclass of the torch trainer that saves
    without the optimizer is still flagged."""
    source = """
import torch

class Trainer:
    def fit(self, loader):
        for epoch in range(10):
            for x in loader:
                self.optimizer.zero_grad()
                self.model(x).sum().backward()
                self.optimizer.step()
            self.save(epoch)

    def save(self, epoch):
        torch.save({"model": self.model.state_dict(), "epoch": epoch,
                    "optimizer": self.optimizer.state_dict()}, "a.pt")

    def resume(self, path):
        self.model.load_state_dict(torch.load(path)["model"])

class FineTuner(Trainer):
    def save(self, epoch):
        torch.save({"model": self.model.state_dict(), "epoch": epoch}, "b.pt")

class TreeTrainer:
    def fit(self, data):
        for epoch in range(10):
            self.booster = self.library.train(data)
            self.save(epoch)

    def save(self, epoch):
        torch.save({"model": self.booster_file, "epoch": epoch}, "tree.pt")
"""
    assert [line for _, line in lint_codes(source, "TD905")] == [22]


def test_one_entry_may_hold_the_optimizer_and_the_scheduler() -> None:
    """VQ-Diffusion keeps every optimizer and scheduler under one
    ``"optimizer_and_scheduler"`` entry, filled in a loop."""
    save = (
        '        state = {"model": model.state_dict(), "last_epoch": epoch}\n'
        "        both = {}\n"
        "        for name in ('g', 'd'):\n"
        '            both[name] = {"optimizer": optimizer.state_dict(),\n'
        '                          "scheduler": scheduler.state_dict()}\n'
        '        state["optimizer_and_scheduler"] = both\n'
        '        torch.save(state, "last.pth")'
    )
    assert td905(save) == []
    assert [code for code, _ in td905(save.replace("optimizer_and_scheduler", "extra"))] == [
        "TD905"
    ]


def test_a_plateau_scheduler_left_out_beside_the_optimizer_is_information() -> None:
    """Dual-Path RNN's trainer: ``self.scheduler.step(v_loss)`` (a plateau scheduler, given
    its metric), and a checkpoint with the model, the optimizer and the epoch: the
    learning rate comes back with the optimizer; only the patience counters restart.
    Without the optimizer, or with an epoch-stepped schedule, it stays a warning."""
    source = """
import torch

class Trainer:
    def __init__(self, model, optimizer, scheduler, resume):
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        if resume:
            ckpt = torch.load(resume, map_location="cpu")
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optim"])
            self.epoch = ckpt["epoch"]

    def run(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                self.optimizer.zero_grad()
                loss = self.model(x).sum()
                loss.backward()
                self.optimizer.step()
            self.scheduler.step(loss.item())
            torch.save({"model": self.model.state_dict(), "optim": self.optimizer.state_dict(),
                        "epoch": epoch}, "last.pt")
            torch.save({"model": self.model.state_dict(), "epoch": epoch}, "light.pt")
"""
    found = {f.location.line: f for f in lint_findings(source, "TD905")}
    assert found[21].severity.value == "info" and "patience" in found[21].message
    assert found[23].severity.value == "warning"
    stepped = source.replace("self.scheduler.step(loss.item())", "self.scheduler.step()")
    found = {f.location.line: f for f in lint_findings(stepped, "TD905")}
    assert found[21].severity.value == "warning"


WARM_START_CALLED_RESUME = """
import torch
from torch import nn

def main(args, model, loader):
    if args.resume:
        state = torch.load("best.pth", map_location="cpu")["model"]
        model.load_state_dict(state)
        print(torch.load("best.pth").keys())
        {more}
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 100)
    for epoch in range(100):
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        scheduler.step()
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}
        torch.save(state, "best.pth")
"""


def test_td905_a_resume_that_reads_back_only_the_weights_starts_the_schedule_over() -> None:
    """PointMLP: the checkpoint keeps the optimizer and the epoch, yet `--resume` reads
    back only the weights (and prints the keys): the run starts over at epoch 0 with a
    new optimizer, so a schedule from its first step is what it should have. A resume
    that restores the epoch does lose the schedule."""
    quiet = WARM_START_CALLED_RESUME.replace("{more}", "pass")
    assert lint_codes(quiet, "TD905") == []
    resumed = WARM_START_CALLED_RESUME.replace("{more}", 'start = torch.load("best.pth")["epoch"]')
    assert [code for code, _ in lint_codes(resumed, "TD905")] == ["TD905"]


def test_a_schedule_replayed_through_a_helper_that_steps_it_is_restored() -> None:
    # ResShift: the resume replays `self.adjust_lr(ii)` up to the saved iteration, and
    # adjust_lr steps the scheduler; the optimizer is still missing from the checkpoint
    source = """
    import torch

    class Trainer:
        def __init__(self, model, loader):
            self.model, self.loader = model, loader
            self.optimizer = torch.optim.AdamW(model.parameters())
            self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, 100)
            self.start = 0

        def adjust_lr(self, step=None):
            self.scheduler.step()

        def resume(self, path):
            state = torch.load(path)
            self.model.load_state_dict(state["model"])
            self.start = state["iteration"]
            for ii in range(1, self.start + 1):
                self.adjust_lr(ii)

        def fit(self, iterations):
            for it in range(self.start, iterations):
                x = next(self.loader)
                self.optimizer.zero_grad()
                self.model(x).sum().backward()
                self.optimizer.step()
                self.adjust_lr()
                torch.save({"model": self.model.state_dict(), "iteration": it}, "c.pt")
    """
    (found,) = lint_findings(source, "TD905")
    assert found.evidence["missing"] == ["optimizer"]
    forgotten = source.replace("self.adjust_lr(ii)", "print(ii)")
    (found,) = lint_findings(forgotten, "TD905")
    assert found.evidence["missing"] == ["optimizer", "scheduler"]


_FACTORY = """
import torch


def get_lr_scheduler(optimizer, params):
    start = params["last_iter"]
    return torch.optim.lr_scheduler.MultiStepLR(optimizer, params["milestones"], 0.5, start)
"""
_BASE = """
import torch
from optim_factory import get_lr_scheduler


class Agent:
    def create_optimizer(self, params, checkpoint=None):
        self.optimizer = torch.optim.Adam(params)
        settings = dict(self.settings, last_iter=-1)
        if checkpoint is not None:
            self.optimizer.load_state_dict(checkpoint["optimizer"])
            settings["last_iter"] = checkpoint["iteration"] - 1
        self.scheduler = get_lr_scheduler(self.optimizer, settings)
"""
_AGENT = """
import torch
from agent_base import Agent


class SegAgent(Agent):
    def train(self, loader, path=None):
        start, checkpoint = 0, None
        if path is not None:
            loaded = torch.load(path)
            self.net.load_state_dict(loaded["model"])
            start = loaded["iteration"]
            checkpoint = loaded
        self.create_optimizer(self.net.parameters(){handed})
        for it in range(start, 1000):
            x = next(loader)
            self.optimizer.zero_grad()
            self.net(x).sum().backward()
            self.optimizer.step()
            self.scheduler.step()
            torch.save({{"model": self.net.state_dict(), "optimizer":
                        self.optimizer.state_dict(), "iteration": it}}, "latest.pt")
"""


def test_a_checkpoint_handed_to_the_programs_scheduler_builder_restores_it(
    tmp_path: Path,
) -> None:
    # PyMIC: the resume hands the checkpoint to a base-class method of another module,
    # which builds the scheduler through a factory at the saved iteration
    (tmp_path / "optim_factory.py").write_text(_FACTORY, encoding="utf-8")
    (tmp_path / "agent_base.py").write_text(_BASE, encoding="utf-8")
    (tmp_path / "seg_agent.py").write_text(_AGENT.format(handed=", checkpoint"), "utf-8")
    (tmp_path / "cls_agent.py").write_text(_AGENT.format(handed=""), encoding="utf-8")
    report = lint(tmp_path, config=LintConfig(select=("TD905", "TD001")), jobs=1)
    found = [(Path(f.location.path or "").name, f.code) for f in report.findings]
    # the agent that builds its optimizer without the checkpoint restarts the schedule
    assert found == [("cls_agent.py", "TD905")]


@pytest.mark.parametrize(
    ("built", "flagged"),
    [
        # MotionBERT: each step multiplies the learning rate the optimizer holds, and the
        # optimizer's restored state holds it decayed: the schedule goes on from there
        ("StepLR(optimizer, step_size=1, gamma=0.9)", False),
        ("StepLR(optimizer, 1)", False),
        ("ExponentialLR(optimizer, 0.9)", False),
        # a schedule that reads its count restarts
        ("StepLR(optimizer, 30)", True),
        ("CosineAnnealingLR(optimizer, 100)", True),
    ],
)
def test_a_per_step_multiplication_goes_on_from_the_restored_learning_rate(
    built: str, flagged: bool
) -> None:
    source = script(RESUME).replace("StepLR(optimizer, 10)", built)
    assert [code for code, _ in lint_codes(source, "TD905")] == (["TD905"] if flagged else [])


def test_a_per_step_multiplication_still_needs_the_optimizer_state() -> None:
    source = script(RESUME).replace("StepLR(optimizer, 10)", "ExponentialLR(optimizer, 0.9)")
    source = source.replace('"optimizer": optimizer.state_dict(),', "")
    (found,) = lint_findings(source, "TD905")
    assert found.evidence["missing"] == ["optimizer", "scheduler"]


_EVAL_ONLY = """
import torch
from torch import nn


class Runner:
    def __init__(self):
        self.model = nn.Linear(4, 2)
        self.optimizer = torch.optim.Adam(self.model.parameters())

    def train(self, loader, start=0):
        for step, (x, y) in enumerate(loader, start):
            self.optimizer.zero_grad()
            nn.functional.mse_loss(self.model(x), y).backward()
            self.optimizer.step()
            torch.save({"step": step, "model": self.model.state_dict()}, f"ckpt_{step}.pt")

    def eval(self, step):
        print(step)


def main(args, loader):
    runner = Runner()
    if args.ckpt is not None:
        ckpt = torch.load(args.ckpt, weights_only=True)
        runner.model.load_state_dict(ckpt["model"])
        runner.eval(step=ckpt["step"])
{rest}
"""


def test_a_checkpoint_read_only_on_the_side_that_does_not_train_is_no_resume() -> None:
    """gsplat's trainer: ``--ckpt`` runs evaluation only, and training runs in the
    ``else`` branch, so the read never feeds training. Training after the same read
    resumes from it, and the checkpoint without the optimizer is still flagged."""
    evaluates = _EVAL_ONLY.replace("{rest}", "    else:\n        runner.train(loader)")
    assert lint_codes(evaluates, "TD905") == []
    resumes = _EVAL_ONLY.replace("{rest}", '    runner.train(loader, start=ckpt["step"])')
    assert [code for code, _ in lint_codes(resumes, "TD905")] == ["TD905"]


OWN_SCHEDULE = """
import torch
from torch import nn

from schedules import *


class Trainer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 2)
        self.optimizer = torch.optim.AdamW(self.parameters())
        self.scheduler = warmup_lr_scheduler(self.optimizer, 100)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for x, y in loader:
                self.optimizer.zero_grad()
                self.net(x).sum().backward()
                self.optimizer.step()
                self.scheduler.step()
            self.save("last.ckpt")

    def save(self, path):
        torch.save({
            "model_state_dict": self.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict(),
            "model_step": {position},
        }}, path)

    def load(self, path):
        checkpoint = torch.load(path)
        self.load_state_dict(checkpoint["model_state_dict"])
        self.optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
        self.scheduler.model_step = checkpoint["model_step"]
"""


def test_the_position_attribute_of_an_own_schedule_is_its_state() -> None:
    """EfficientConformer: the checkpoint keeps ``self.scheduler.model_step``, the count
    the project's own schedule (from another module) reads its learning rate from, and
    ``load()`` assigns it back: the schedule goes on from there."""
    source = OWN_SCHEDULE.replace("{position}", "self.scheduler.model_step").replace("}}", "}")
    assert lint_codes(source, "TD905") == []


def test_a_step_counted_apart_from_the_schedule_still_lacks_it() -> None:
    """A count of the trainer's own, not read from the schedule, does not restore it."""
    source = OWN_SCHEDULE.replace("{position}", "self.steps").replace("}}", "}")
    source = source.replace("self.scheduler.model_step = ", "self.steps = ")
    (found,) = lint_findings(source, "TD905")
    assert found.evidence["missing"] == ["scheduler"]
