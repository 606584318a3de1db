import os

import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
os.makedirs("outputs/run1", exist_ok=True)
os.chdir("outputs/run1")
print(train(model, optimizer, steps=3))
torch.save(model.state_dict(), "state.pt")
with open("log.txt", "w") as handle:
    handle.write(os.getcwd().rsplit(os.sep, 2)[-2] + "\n")
