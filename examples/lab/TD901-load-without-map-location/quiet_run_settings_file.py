"""A captioning fine-tune that restores its training settings from the checkpoint folder.

Next to the weights, each checkpoint keeps `training_args.bin`, the run's argparse
Namespace written with `torch.save(args, ...)` as Hugging Face's Trainer does. Reading it
back needs no `map_location`: a Namespace of numbers and strings holds no tensor that
could land on a GPU. The weights themselves are loaded with `map_location`.
"""

import argparse
import os
import tempfile

import torch
from torch import nn


def save_checkpoint(model: nn.Module, args: argparse.Namespace, folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(folder, "weights.pt"))
    torch.save(args, os.path.join(folder, "training_args.bin"))


def restore(model: nn.Module, checkpoint: str, device: torch.device) -> int:
    train_args = torch.load(os.path.join(checkpoint, "training_args.bin"), weights_only=False)
    state = torch.load(os.path.join(checkpoint, "weights.pt"), map_location=device)
    model.load_state_dict(state)
    return train_args.max_seq_length


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    parser = argparse.ArgumentParser()
    parser.add_argument("--max_seq_length", type=int, default=40)
    args = parser.parse_args([])
    model = nn.Linear(8, 8).to(device)
    folder = os.path.join(tempfile.mkdtemp(), "checkpoint-1")
    save_checkpoint(model, args, folder)
    print("restored max_seq_length", restore(nn.Linear(8, 8).to(device), folder, device))


if __name__ == "__main__":
    main()
