"""Feature extraction in a distributed program: one file per sample, named after it.

Each rank iterates its own shard of the dataset (a DistributedSampler splits the indices),
and every feature file takes its name from the sample it holds: no two ranks write the same
file, so no rank-0 guard is needed. Runs as a one-process gloo group on the CPU.
"""

import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class NamedImages(Dataset):
    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> tuple[torch.Tensor, str]:
        generator = torch.Generator().manual_seed(index)
        return torch.randn(3, 8, 8, generator=generator), f"images/class{index % 3}/{index:04d}.png"


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group(
            "gloo", init_method=f"file://{folder}/rendezvous", rank=0, world_size=1
        )
        dataset = NamedImages()
        loader = DataLoader(dataset, batch_size=4, sampler=DistributedSampler(dataset))
        encoder = nn.Sequential(nn.Conv2d(3, 4, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        encoder.eval()
        out = os.path.join(folder, "features")
        with torch.no_grad():
            for images, paths in loader:
                features = encoder(images)
                for path, feature in zip(paths, features):
                    parts = path.split("/")
                    target = os.path.join(out, parts[-2])
                    os.makedirs(target, exist_ok=True)
                    torch.save(feature.clone(), os.path.join(target, parts[-1] + ".pt"))
        dist.barrier()
        print(sum(len(files) for _, _, files in os.walk(out)), "feature files")
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
