"""A training script from the PyTorch 0.2 days, written for Python 2.7 and kept as it was.

Its print statements make it Python 2: Python 3 refuses the file, and no other rule can
check it, but nobody runs it with Python 3. The finding is information.
"""

import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    x = torch.randn(16, 4)
    optimizer.zero_grad()
    loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
    loss.backward()
    optimizer.step()
    if step % 10 == 0:
        print 'step', step, 'loss', loss.item()  # expect: TD002
