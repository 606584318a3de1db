"""Species classifier over per-class recording folders. Samples are read
folder by folder (so the dataset is class-sorted) and batches come from an
explicit BatchSampler, which keeps batch construction in one place."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import BatchSampler, ConcatDataset, DataLoader, TensorDataset

N_SPECIES = 8


def folder(species, n, seed):
    g = torch.Generator().manual_seed(seed * 100 + species)
    centre = torch.randn(20, generator=torch.Generator().manual_seed(species)) * 1.2
    x = centre + torch.randn(n, 20, generator=g)
    return TensorDataset(x, torch.full((n,), species))


def load_split(n_per_species, seed):
    return ConcatDataset([folder(s, n_per_species, seed) for s in range(N_SPECIES)])


def make_train_loader(dataset, batch_size):
    sampler = torch.utils.data.SequentialSampler(dataset)
    return DataLoader(dataset, batch_sampler=BatchSampler(sampler, batch_size, drop_last=False))


def build():
    train_set = load_split(250, seed=1)
    loader = make_train_loader(train_set, batch_size=50)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, N_SPECIES))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return model, loader, F.cross_entropy, optimizer


def main():
    torch.manual_seed(0)
    model, loader, loss_fn, optimizer = build()
    val = load_split(60, seed=2)
    xv = torch.stack([val[i][0] for i in range(len(val))])
    yv = torch.stack([val[i][1] for i in range(len(val))])
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            loss_fn(model(xb), yb).backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            pred = model(xv).argmax(1)
        print(f"epoch {epoch} val_acc={(pred == yv).float().mean().item():.3f} "
              f"distinct_predicted={pred.unique().numel()}")


if __name__ == "__main__":
    main()
