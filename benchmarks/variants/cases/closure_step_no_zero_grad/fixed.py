"""Full-batch L-BFGS fit of a small MLP to a smooth 2-D surface.
L-BFGS re-evaluates the objective several times per step, so the
forward/backward pass lives in a closure handed to optimizer.step()."""
import torch
import torch.nn as nn


def surface(n, seed):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * 4 - 2
    z = torch.sin(xy[:, :1] * 1.5) * torch.cos(xy[:, 1:]) + 0.1 * xy[:, :1] ** 2
    return xy, z


def main():
    torch.manual_seed(0)
    x, z = surface(512, seed=3)
    xv, zv = surface(256, seed=4)
    net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=10, history_size=20,
                            line_search_fn="strong_wolfe")
    mse = nn.MSELoss()

    def closure():
        opt.zero_grad()
        loss = mse(net(x), z)
        loss.backward()
        return loss

    for outer in range(10):
        train_loss = opt.step(closure)
        if outer % 5 == 4:
            with torch.no_grad():
                val = mse(net(xv), zv).item()
            print(f"outer {outer} train_mse={train_loss.item():.5f} val_mse={val:.5f}")
    print(f"final val_mse={val:.5f}")


if __name__ == "__main__":
    main()
