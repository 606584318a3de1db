"""LoRA fine-tuning: a frozen base model plus low-rank adapters, B initialised to zero.

As in the LoRA paper, `A` is random and `B` is zero, so the adapted model starts exactly
equal to the base model; at the first step only `B` receives a non-zero gradient, and
`A` starts learning once `B` has moved. Only the adapter parameters are optimised.
"""

import math

import torch
from torch import nn

RANK = 4


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank=RANK, alpha=8.0):
        super().__init__()
        self.base = base.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling


def base_model():
    return nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 4))


def add_adapters(model):
    for index, layer in enumerate(model):
        if isinstance(layer, nn.Linear):
            model[index] = LoRALinear(layer)
    return model


def task_batch(generator, size=64):
    x = torch.randn(size, 16, generator=generator)
    return x, (x[:, 4:8] - x[:, :4]).argmax(dim=1)


def build():
    model = add_adapters(base_model())
    adapters = [p for name, p in model.named_parameters() if "lora_" in name]
    return model, torch.optim.AdamW(adapters, lr=5e-3, weight_decay=0.0)


def make():
    torch.manual_seed(0)
    model, optimizer = build()
    return model, task_batch(torch.Generator().manual_seed(41)), nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(42)
    model, optimizer = build()
    criterion = nn.CrossEntropyLoss()
    model.train()
    for step in range(100):
        x, y = task_batch(generator)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 25 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable {trainable} of {sum(p.numel() for p in model.parameters())}")


if __name__ == "__main__":
    main()
