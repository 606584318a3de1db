"""A trainer whose only DistributedSampler feeds the evaluation loader.

The trainer builds each loader in a factory method (as pythae's ``BaseTrainer`` does)
and keeps the results on ``self``. Training reshuffles through ``shuffle=True``; the
evaluation set is split across the ranks by a ``DistributedSampler`` that never sees
``set_epoch``. That is harmless: ``eval_step`` only iterates it under
``torch.no_grad()``, takes no optimizer step, and visits every sample once per epoch,
so the order it visits them in changes no metric.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, model, train_set, eval_set, epochs=3):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.epochs = epochs
        train_loader = self.get_train_dataloader(train_set)
        eval_loader = self.get_eval_dataloader(eval_set)
        self.train_loader = train_loader
        self.eval_loader = eval_loader

    def get_train_dataloader(self, dataset):
        return DataLoader(dataset, batch_size=16, shuffle=True)

    def get_eval_dataloader(self, dataset):
        # one process here; under torchrun, num_replicas/rank come from the process group
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0)
        return DataLoader(dataset, batch_size=32, sampler=sampler)

    def train_step(self):
        self.model.train()
        total = torch.zeros(())
        for x, y in self.train_loader:
            loss = nn.functional.mse_loss(self.model(x), y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.detach()
        return total.item() / len(self.train_loader)

    def eval_step(self):
        self.model.eval()
        total = 0.0
        with torch.no_grad():
            for x, y in self.eval_loader:
                total += nn.functional.mse_loss(self.model(x), y, reduction="sum").item()
        return total / len(self.eval_loader.dataset)

    def train(self):
        for epoch in range(self.epochs):
            train_loss = self.train_step()
            eval_loss = self.eval_step()
            print(f"epoch {epoch}: train {train_loss:.4f}, eval {eval_loss:.4f}")


def main() -> None:
    torch.manual_seed(0)
    weights = torch.randn(4, 1)
    inputs = torch.randn(160, 4)
    dataset = TensorDataset(inputs, inputs @ weights)
    train_set, eval_set = torch.utils.data.random_split(dataset, [128, 32])
    Trainer(nn.Linear(4, 1), train_set, eval_set).train()


if __name__ == "__main__":
    main()
