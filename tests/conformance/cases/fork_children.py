import multiprocessing
import os

import torch
from common import model_and_optimizer, train


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, index):
        x = torch.full((6,), float(index % 5))
        return x, x[:2].sum().expand(2).clone()


def child(path):
    model, optimizer = model_and_optimizer(seed=1)
    torch.save(train(model, optimizer, steps=2), path)


if __name__ == "__main__":
    model, optimizer = model_and_optimizer()
    loader = torch.utils.data.DataLoader(
        Numbers(), batch_size=8, num_workers=2, multiprocessing_context="fork"
    )
    for x, y in loader:
        optimizer.zero_grad()
        (model(x) - y).pow(2).mean().backward()
        optimizer.step()
    pid = os.fork()
    if pid == 0:
        child("forked.pt")
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("fork status", status)
    process = multiprocessing.get_context("fork").Process(target=child, args=("process.pt",))
    process.start()
    process.join()
    print("process exit", process.exitcode)
    torch.save(model.state_dict(), "state.pt")
