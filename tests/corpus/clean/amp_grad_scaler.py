"""Mixed precision with `torch.amp`: autocast, GradScaler, unscale before clipping.

Runs in float32 on a CPU-only machine (`enabled=` is false there) and in fp16 on CUDA.
The order is the documented one: scale(loss).backward(), unscale_, clip_grad_norm_,
scaler.step, scaler.update, then the per-step scheduler.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    use_amp = device.type == "cuda"

    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(384, 32, generator=generator)
    labels = (inputs[:, :8].sum(dim=1) > 0).long()
    loader = DataLoader(TensorDataset(inputs, labels), batch_size=32, shuffle=True)

    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.LayerNorm(128), nn.Linear(128, 2)).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    epochs = 2
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=epochs * len(loader))
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp)

    for epoch in range(epochs):
        model.train()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            with torch.amp.autocast(device_type=device.type, dtype=torch.float16, enabled=use_amp):
                logits = model(x)
                loss = criterion(logits, y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
        print(f"epoch {epoch}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")


if __name__ == "__main__":
    main()
