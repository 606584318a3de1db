import warnings

import torch
from common import batch, model_and_optimizer, train

warnings.filterwarnings("ignore", category=DeprecationWarning)
model, optimizer = model_and_optimizer()
print(train(model, optimizer, steps=3))
scripted = torch.jit.script(model)
traced = torch.jit.trace(model, batch(0)[0])
x = batch(9)[0]
print(torch.equal(scripted(x), model(x)), torch.equal(traced(x), model(x)))
scripted.save("scripted.pt")
print(train(model, optimizer, steps=2))
