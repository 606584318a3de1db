"""Fine-tuning a pretrained-style network: new head, frozen backbone, gradual unfreezing.

"Pretrained" weights are loaded from a checkpoint (an in-memory file here) with
`weights_only=True`; the checkpoint has no head for the new task, so it is loaded with
`strict=False` and the returned missing/unexpected keys are checked. The old 10-class head
is replaced BEFORE the optimizer is built, the backbone is frozen with
`requires_grad_(False)` and kept in eval mode (BatchNorm statistics frozen too) by
overriding `train()`, and only the head goes to the optimizer. Halfway through, the last
backbone stage is unfrozen and added to the optimizer with `add_param_group`.
"""

import io

import torch
from torch import nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.stage1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.stage2 = nn.Sequential(nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU())
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())

    def forward(self, x):
        return self.pool(self.stage2(self.stage1(x)))


class Classifier(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.backbone = Backbone()
        self.fc = nn.Linear(32, classes)
        self.frozen = []

    def freeze(self, *modules):
        self.frozen = list(modules)
        for module in modules:
            module.requires_grad_(False)
            module.eval()

    def unfreeze(self, module):
        module.requires_grad_(True)
        self.frozen.remove(module)
        module.train(self.training)

    def train(self, mode=True):
        super().train(mode)
        for module in self.frozen:
            module.eval()
        return self

    def forward(self, x):
        return self.fc(self.backbone(x))


def pretrained_checkpoint():
    """Stands in for a downloaded backbone checkpoint: backbone weights only."""
    source = Classifier()
    buffer = io.BytesIO()
    torch.save(source.backbone.state_dict(), buffer)
    buffer.seek(0)
    return buffer


def build():
    model = Classifier()
    state = torch.load(pretrained_checkpoint(), map_location="cpu", weights_only=True)
    result = model.load_state_dict({f"backbone.{k}": v for k, v in state.items()}, strict=False)
    assert not result.unexpected_keys and set(result.missing_keys) == {"fc.weight", "fc.bias"}, result
    model.fc = nn.Linear(model.fc.in_features, 4)
    model.freeze(model.backbone.stage1, model.backbone.stage2)
    optimizer = torch.optim.SGD(model.fc.parameters(), lr=0.05, momentum=0.9)
    return model, optimizer


def make_batch(generator, size=48):
    labels = torch.randint(0, 4, (size,), generator=generator)
    images = torch.randn(size, 3, 16, 16, generator=generator)
    # Classes 0-2 get a brighter colour channel; class 3 none.
    images += nn.functional.one_hot(labels, 4)[:, :3].float().view(size, 3, 1, 1)
    return images, labels


def make():
    torch.manual_seed(0)
    model, optimizer = build()
    return model, make_batch(torch.Generator().manual_seed(13)), nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    model, optimizer = build()
    criterion = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(14)
    model.train()
    for step in range(40):
        if step == 20:
            model.unfreeze(model.backbone.stage2)
            optimizer.add_param_group({"params": model.backbone.stage2.parameters(), "lr": 0.005})
        images, labels = make_batch(generator)
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable parameters: {trainable}")


if __name__ == "__main__":
    main()
