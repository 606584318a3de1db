import torch
from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
compiled = torch.compile(model, backend="eager")  # dynamo only: cheap on CPU
print(train(compiled, optimizer, steps=4))
torch.save(model.state_dict(), "state.pt")
