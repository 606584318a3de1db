"""Mixed-precision training of a small 1-D segmentation net (mask of the
active region of a signal). The step is split into helpers on a Runner;
gradients are clipped element-wise to tame noisy batches."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
AMP_DTYPE = torch.float16 if DEVICE == "cuda" else torch.bfloat16


def make_signals(n, seed):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, 40, (n, 1), generator=g)
    width = torch.randint(8, 24, (n, 1), generator=g)
    pos = torch.arange(64).unsqueeze(0)
    mask = ((pos >= start) & (pos < start + width)).float()
    x = mask * 1.5 + 0.7 * torch.randn(n, 64, generator=g)
    return x.unsqueeze(1), mask.unsqueeze(1)


class Runner:
    def __init__(self, model, lr, clip_value):
        self.model = model.to(DEVICE)
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        self.scaler = torch.amp.GradScaler(DEVICE)
        self.loss_fn = nn.BCEWithLogitsLoss()
        self.clip_value = clip_value

    def _forward_loss(self, x, y):
        with torch.autocast(DEVICE, dtype=AMP_DTYPE):
            logits = self.model(x)
        return self.loss_fn(logits.float(), y)

    def _clip(self):
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_value_(self.model.parameters(), self.clip_value)

    def _apply(self):
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        loss = self._forward_loss(x, y)
        self.scaler.scale(loss).backward()
        self._clip()
        self._apply()
        return loss.item()


def dice(logits, target):
    pred = (logits > 0).float()
    return (2 * (pred * target).sum() / (pred.sum() + target.sum() + 1e-6)).item()


def main():
    torch.manual_seed(0)
    x, y = make_signals(2000, seed=1)
    xv, yv = make_signals(500, seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Sequential(nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(),
                          nn.Conv1d(16, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 1, 1))
    runner = Runner(model, lr=0.05, clip_value=0.5)
    for epoch in range(3):
        model.train()
        for xb, yb in loader:
            loss = runner.step(xb.to(DEVICE), yb.to(DEVICE))
        model.eval()
        with torch.no_grad():
            score = dice(model(xv.to(DEVICE)), yv.to(DEVICE))
        print(f"epoch {epoch} loss={loss:.4f} val_dice={score:.3f}")


if __name__ == "__main__":
    main()
