"""Normalisation statistics computed in two passes: the first saves the mean and the
standard deviation with a helper that names each file `f"{prefix}_mean.pt"`, the second
reads `parameter_mean.pt` back to standardise the differences.

The helper saves `.cpu()` tensors, so the files hold CPU tensors and load on the CPU
whatever devices this machine has: no `map_location` is needed.
"""

import os
import tempfile

import torch


def save_stats(folder: str, values: torch.Tensor, prefix: str) -> None:
    torch.save(values.mean(0).cpu(), os.path.join(folder, f"{prefix}_mean.pt"))
    torch.save(values.std(0).cpu(), os.path.join(folder, f"{prefix}_std.pt"))


def main() -> None:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    folder = tempfile.mkdtemp()
    states = torch.randn(100, 4, device=device).cumsum(0)
    save_stats(folder, states, "parameter")
    mean = torch.load(os.path.join(folder, "parameter_mean.pt")).to(device)
    std = torch.load(os.path.join(folder, "parameter_std.pt")).to(device)
    diffs = ((states - mean) / std).diff(dim=0)
    save_stats(folder, diffs, "diff")
    print(sorted(os.listdir(folder)), f"{diffs.std():.3f}")


if __name__ == "__main__":
    main()
