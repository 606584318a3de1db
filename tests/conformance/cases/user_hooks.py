import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
calls = []
model.register_forward_pre_hook(lambda m, args: calls.append("pre"))
handle = model[0].register_forward_hook(lambda m, args, out: out * 1.0)
model[2].register_full_backward_hook(lambda m, gin, gout: calls.append("back"))
model._register_state_dict_hook(lambda m, state, prefix, local: state)
model.register_state_dict_pre_hook(lambda m, prefix, keep_vars: calls.append("sd"))
model.register_load_state_dict_post_hook(lambda m, keys: calls.append("load"))
print(train(model, optimizer, steps=3))
handle.remove()
state = model.state_dict()
model.load_state_dict(state)
print(sorted(set(calls)), len(calls))
print("hooks", len(model._forward_pre_hooks), len(model[0]._forward_hooks))
torch.save(state, "state.pt")
