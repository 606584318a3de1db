"""A trainer that evaluates `self.model_eval`, an attribute alias of `self.model`.

As in makani's trainers, every binding of `self.model_eval` (and of `self.model_train`)
in the class is `self.model`, compiled or not: the three attributes name one module.
`_set_eval()` puts `self.model` in eval mode before the validation loop, so the forward
through `self.model_eval` runs with dropout off and BatchNorm on its running statistics.
"""

import torch
from torch import nn


class Trainer:
    def __init__(self, jit_mode: str = "none") -> None:
        self.model = nn.Sequential(
            nn.Linear(8, 16), nn.Dropout(0.3), nn.BatchNorm1d(16), nn.Linear(16, 1)
        )
        self._compile_model(jit_mode)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def _compile_model(self, jit_mode: str) -> None:
        if jit_mode == "inductor":
            self.model = torch.compile(self.model)
            self.model_train = self.model
            self.model_eval = self.model
        else:
            self.model_train = self.model
            self.model_eval = self.model

    def _set_train(self) -> None:
        self.model.train()

    def _set_eval(self) -> None:
        self.model.eval()

    def train_one_epoch(self, steps: int = 20) -> None:
        self._set_train()
        for _ in range(steps):
            x = torch.randn(32, 8)
            loss = nn.functional.mse_loss(self.model_train(x), x[:, :1])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()

    def validate_one_epoch(self, batches: list[torch.Tensor]) -> float:
        self._set_eval()
        total = 0.0
        with torch.no_grad():
            for x in batches:
                total += nn.functional.mse_loss(self.model_eval(x), x[:, :1]).item()
        return total / len(batches)


def main() -> None:
    torch.manual_seed(0)
    trainer = Trainer()
    trainer.train_one_epoch()
    loss = trainer.validate_one_epoch([torch.randn(16, 8) for _ in range(3)])
    assert not trainer.model_eval.training
    print(f"validation loss {loss:.3f}")


if __name__ == "__main__":
    main()
