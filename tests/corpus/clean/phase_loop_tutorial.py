"""The transfer-learning-tutorial loop: one loop over phases, grad mode by phase.

`for phase in ("train", "val")` sets `model.train()` or `model.eval()`, runs the forward
under `torch.set_grad_enabled(phase == "train")`, and calls backward and step only in
the train phase. The best weights are deep-copied on the best validation accuracy.
"""

import copy

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_datasets():
    generator = torch.Generator().manual_seed(34)
    y = torch.randint(0, 2, (360,), generator=generator)
    x = torch.randn(360, 3, 8, 8, generator=generator)
    x[:, 0] += 0.5 * y.view(-1, 1, 1)
    return {"train": TensorDataset(x[:300], y[:300]), "val": TensorDataset(x[300:], y[300:])}


def build_model():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Dropout(0.25), nn.Linear(32, 2))


def make():
    torch.manual_seed(0)
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return model, make_datasets()["train"].tensors, nn.CrossEntropyLoss(), optimizer


def main():
    torch.manual_seed(0)
    datasets = make_datasets()
    loaders = {"train": DataLoader(datasets["train"], batch_size=30, shuffle=True),
               "val": DataLoader(datasets["val"], batch_size=60, shuffle=False)}
    model = build_model()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)

    best_weights, best_accuracy = copy.deepcopy(model.state_dict()), 0.0
    for epoch in range(4):
        for phase in ("train", "val"):
            if phase == "train":
                model.train()
            else:
                model.eval()
            running_loss, running_correct = 0.0, 0
            for inputs, labels in loaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    loss = criterion(outputs, labels)
                    predictions = outputs.argmax(dim=1)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_correct += (predictions == labels).sum().item()
            if phase == "train":
                scheduler.step()
            accuracy = running_correct / len(datasets[phase])
            print(f"epoch {epoch} {phase}: loss {running_loss / len(datasets[phase]):.4f} acc {accuracy:.2%}")
            if phase == "val" and accuracy > best_accuracy:
                best_accuracy, best_weights = accuracy, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_weights)


if __name__ == "__main__":
    main()
