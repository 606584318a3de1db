"""Text-topic classifier over bag-of-words vectors. Memory limits the
micro-batch to 16, so the trainer accumulates gradients to an effective
batch of 128 (accumulate_grad_batches in the config), with the LR tuned
for that large batch."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

CFG = {"micro_batch": 16, "accumulate_grad_batches": 8, "lr": 0.3, "epochs": 3, "vocab": 300, "topics": 10}


def make_docs(n, seed):
    topic_words = torch.rand(CFG["topics"], CFG["vocab"], generator=torch.Generator().manual_seed(0)) ** 6
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CFG["topics"], (n,), generator=g)
    rates = topic_words[y] * 3 + 0.2
    x = torch.poisson(rates, generator=g)
    return torch.log1p(x), y


class AccumulatingTrainer:
    def __init__(self, model, cfg):
        self.model = model
        self.accum = cfg["accumulate_grad_batches"]
        self.optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
        self.micro_step = 0

    def compute_loss(self, batch):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def backward(self, loss):
        (loss / self.accum).backward()

    def optimizer_step_if_ready(self):
        self.micro_step += 1
        if self.micro_step % self.accum == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def train_epoch(self, loader):
        self.model.train()
        for batch in loader:
            self.backward(self.compute_loss(batch))
            self.optimizer_step_if_ready()


def main():
    torch.manual_seed(0)
    x, y = make_docs(4096, seed=1)
    xv, yv = make_docs(1024, seed=2)
    loader = DataLoader(TensorDataset(x, y), batch_size=CFG["micro_batch"], shuffle=True)
    model = nn.Sequential(nn.Linear(CFG["vocab"], 128), nn.ReLU(), nn.Linear(128, CFG["topics"]))
    trainer = AccumulatingTrainer(model, CFG)
    for epoch in range(CFG["epochs"]):
        trainer.train_epoch(loader)
        model.eval()
        with torch.no_grad():
            out = model(xv)
            val_loss = F.cross_entropy(out, yv).item()
            acc = (out.argmax(1) == yv).float().mean().item()
        print(f"epoch {epoch} val_loss={val_loss:.4f} val_acc={acc:.3f}")


if __name__ == "__main__":
    main()
