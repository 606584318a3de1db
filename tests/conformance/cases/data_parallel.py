import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
parallel = torch.nn.DataParallel(model)  # on CPU: a pass-through wrapper
print(train(parallel, optimizer, steps=4))
torch.save(parallel.module.state_dict(), "state.pt")
torch.save(parallel, "parallel.pt")
