"""TD226 at lint: a layer swapped onto a model and then frozen before any training."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_codes

HEADER = """
import torch
from torch import nn
import torchvision
"""


def test_a_new_head_frozen_after_it_is_attached_is_flagged() -> None:
    source = (
        HEADER
        + """
def finetune(model, loader):
    model.fc = nn.Linear(512, 20)
    for param in model.fc.parameters():
        param.requires_grad = False  # expect: TD226
    model.classifier[6] = nn.Linear(4096, 20)
    model.classifier.requires_grad_(False)  # expect: TD226
    train(model, loader)

def train(model, loader):
    for x, y in loader:
        nn.functional.cross_entropy(model(x), y).backward()
"""
    )
    assert_marked(source, "TD226")


def test_unfrozen_loaded_pretrained_or_self_built_layers_stay_quiet() -> None:
    source = (
        HEADER
        + """
def unfrozen(model):
    model.fc = nn.Linear(512, 20)
    model.fc.requires_grad_(False)
    model.fc.requires_grad_(True)

def loaded(model, state):
    model.head = nn.Linear(512, 20)
    for p in model.head.parameters():
        p.requires_grad = False
    model.load_state_dict(state)

def pretrained(model):
    model.backbone = torchvision.models.resnet18(weights="DEFAULT")
    model.backbone.requires_grad_(False)

def whole(model):
    model.fc = nn.Linear(512, 20)
    for p in model.parameters():
        p.requires_grad = False
    for p in model.fc.parameters():
        p.requires_grad = True

class Agent:
    def __init__(self):
        self.target = nn.Linear(8, 8)
        for p in self.target.parameters():
            p.requires_grad = False

def step(loss):
    loss.backward()
"""
    )
    assert lint_codes(source, "TD226") == []
