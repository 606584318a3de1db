"""Correct training programs written the ways people write them draw no autograd or
train/eval finding: the false-alarm guard for TD201-TD207 and TD501-TD502."""

from __future__ import annotations

import pytest

from tests.unit.static.helpers import lint_codes

PROGRAMS = {
    "amp_clip_accumulate": """
        import torch
        from torch import nn
        def train(model, loader, optimizer, scheduler, accum=4, device="cuda"):
            scaler = torch.amp.GradScaler(device)
            criterion = nn.CrossEntropyLoss()
            model.train()
            running = 0.0
            for step, (x, y) in enumerate(loader):
                with torch.autocast(device_type=device, dtype=torch.float16):
                    loss = criterion(model(x.to(device)), y.to(device)) / accum
                scaler.scale(loss).backward()
                running += loss.item()
                if (step + 1) % accum == 0 or step + 1 == len(loader):
                    scaler.unscale_(optimizer)
                    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=True)
                    scheduler.step()
            return running
    """,
    "accelerate": """
        import torch
        from accelerate import Accelerator
        def main(model, optimizer, train_dataloader, eval_dataloader, lr_scheduler, epochs):
            accelerator = Accelerator(gradient_accumulation_steps=2)
            model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = \\
                accelerator.prepare(model, optimizer, train_dataloader, eval_dataloader,
                                    lr_scheduler)
            for epoch in range(epochs):
                model.train()
                for batch in train_dataloader:
                    with accelerator.accumulate(model):
                        outputs = model(**batch)
                        accelerator.backward(outputs.loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
                model.eval()
                for batch in eval_dataloader:
                    with torch.no_grad():
                        outputs = model(**batch)
    """,
    "trainer_class": """
        import torch
        from torch import nn
        class Trainer:
            def __init__(self, model: nn.Module, lr: float):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
                self.criterion = nn.CrossEntropyLoss()
                self.history = []
            def _step(self, x, y):
                self.optimizer.zero_grad()
                loss = self.criterion(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                return loss.detach()
            def train_epoch(self, loader):
                self.model.train()
                for x, y in loader:
                    self.history.append(self._step(x, y))
            @torch.no_grad()
            def evaluate(self, loader):
                self.model.eval()
                return sum((self.model(x).argmax(1) == y).sum().item() for x, y in loader)
            def fit(self, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    self.train_epoch(train_loader)
                    print(epoch, self.evaluate(val_loader))
    """,
    "dcgan": """
        import torch
        from torch import nn
        def train(netD, netG, dataloader, optimizerD, optimizerG, nz, epochs):
            criterion = nn.BCELoss()
            for epoch in range(epochs):
                for i, data in enumerate(dataloader, 0):
                    netD.zero_grad()
                    real = data[0]
                    label = torch.full((real.size(0),), 1.0)
                    errD_real = criterion(netD(real).view(-1), label)
                    errD_real.backward()
                    noise = torch.randn(real.size(0), nz, 1, 1)
                    fake = netG(noise)
                    label.fill_(0.0)
                    errD_fake = criterion(netD(fake.detach()).view(-1), label)
                    errD_fake.backward()
                    optimizerD.step()
                    netG.zero_grad()
                    label.fill_(1.0)
                    errG = criterion(netD(fake).view(-1), label)
                    errG.backward()
                    optimizerG.step()
    """,
    "wgan_clipping": """
        import torch
        def train(critic, generator, loader, opt_c, opt_g, clip=0.01, n_critic=5):
            for i, real in enumerate(loader):
                opt_c.zero_grad()
                loss_c = critic(generator(torch.randn(64, 100)).detach()).mean() \\
                    - critic(real).mean()
                loss_c.backward()
                opt_c.step()
                for p in critic.parameters():
                    p.data.clamp_(-clip, clip)
                if i % n_critic == 0:
                    opt_g.zero_grad()
                    loss_g = -critic(generator(torch.randn(64, 100))).mean()
                    loss_g.backward()
                    opt_g.step()
    """,
    "reinforce": """
        import torch
        def train(policy, env, optimizer, episodes, gamma=0.99):
            for episode in range(episodes):
                state, log_probs, rewards = env.reset(), [], []
                for t in range(1000):
                    dist = torch.distributions.Categorical(logits=policy(state))
                    action = dist.sample()
                    log_probs.append(dist.log_prob(action))
                    state, reward, done, _ = env.step(action.item())
                    rewards.append(reward)
                    if done:
                        break
                returns = torch.tensor(rewards).flip(0).cumsum(0).flip(0)
                loss = -(torch.stack(log_probs) * returns).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """,
    "ema_and_swa": """
        import torch
        from torch.optim.swa_utils import AveragedModel, SWALR, update_bn
        def train(model, loader, optimizer, epochs, swa_start):
            swa_model = AveragedModel(model)
            swa_scheduler = SWALR(optimizer, swa_lr=0.05)
            for epoch in range(epochs):
                for x, y in loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
                if epoch > swa_start:
                    swa_model.update_parameters(model)
                    swa_scheduler.step()
            update_bn(loader, swa_model)
    """,
    "lbfgs": """
        import torch
        def fit(model, x, y, steps=20):
            optimizer = torch.optim.LBFGS(model.parameters(), lr=1)
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = ((model(x) - y) ** 2).mean()
                    loss.backward()
                    return loss
                optimizer.step(closure)
    """,
    "validation_loss_sum": """
        import torch
        def validate(model, loader, criterion):
            model.eval()
            total = 0
            with torch.no_grad():
                for x, y in loader:
                    total += criterion(model(x), y)
            model.train()
            return total / len(loader)
    """,
    "mc_dropout_and_bn_recalibration": """
        import torch
        def predict_with_uncertainty(model, x, samples=30):
            model.train()
            with torch.no_grad():
                preds = torch.stack([model(x) for _ in range(samples)])
            model.eval()
            return preds.mean(0), preds.std(0)
    """,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_correct_program_is_quiet(name: str) -> None:
    assert lint_codes(PROGRAMS[name], "TD2", "TD5") == []
