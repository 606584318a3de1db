import copy
import pickle

import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer(optimizer="adam")
print(train(model, optimizer, steps=3))
blob = pickle.dumps(optimizer)
clone = pickle.loads(blob)
twin = copy.deepcopy(optimizer)
print("groups", len(clone.param_groups), len(twin.param_groups), len(clone.state))
print("pre-hooks", len(clone._optimizer_step_pre_hooks), len(twin._optimizer_step_post_hooks))
torch.save(optimizer.state_dict(), "optimizer.pt")
print(train(model, optimizer, steps=2))
