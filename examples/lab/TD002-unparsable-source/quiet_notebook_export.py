# -*- coding: utf-8 -*-
"""A Colab notebook downloaded as a .py file, its shell escapes and magics kept.

`!pip install`, `%matplotlib inline` and `files = !ls` are IPython, and the notebook runs
them: the file is IPython source, not broken Python. lint reads it as the notebook does
and checks the training code around the magics, every line where it was.
"""

!pip install -q torchvision
%matplotlib inline

import torch
from torch import nn

files = !ls data

# In[2]:

%%time
torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 4)
y = x.sum(dim=1, keepdim=True)
for epoch in range(3):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()

# In[3]:

%%bash
nvidia-smi --query-gpu=name --format=csv
ls -l checkpoints | wc -l

# In[4]:

if torch.cuda.is_available():
    !nvidia-smi
torch.save(model.state_dict(), "model.pt")
