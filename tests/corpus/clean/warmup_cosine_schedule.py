"""Linear warm-up then cosine decay, stepped once per optimizer step, after it.

`SequentialLR` chains `LinearLR` (warm-up) and `CosineAnnealingLR`; the scheduler is
stepped right after `optimizer.step()` on every batch, as PyTorch requires since 1.1.
"""

import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
from torch.utils.data import DataLoader, TensorDataset

WARMUP_STEPS = 10
EPOCHS = 3


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(8)
    x = torch.randn(320, 24, generator=generator)
    y = torch.randint(0, 6, (320,), generator=generator)
    x = x + nn.functional.one_hot(y, 24).float() * 2.0
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)

    model = nn.Sequential(nn.Linear(24, 64), nn.SiLU(), nn.Linear(64, 6))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    total_steps = EPOCHS * len(loader)
    warmup = LinearLR(optimizer, start_factor=0.1, total_iters=WARMUP_STEPS)
    decay = CosineAnnealingLR(optimizer, T_max=total_steps - WARMUP_STEPS)
    scheduler = SequentialLR(optimizer, schedulers=[warmup, decay], milestones=[WARMUP_STEPS])
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(EPOCHS):
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}, lr {optimizer.param_groups[0]['lr']:.2e}")


if __name__ == "__main__":
    main()
