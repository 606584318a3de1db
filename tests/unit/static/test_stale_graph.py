"""TD228 backward-through-stepped-model: a loss back-propagated through weights an
optimizer step already changed."""

from __future__ import annotations

from tests.unit.static.helpers import assert_marked, lint_findings


def test_a_generator_loss_computed_before_the_discriminator_step_is_flagged() -> None:
    """MorvanZhou's GAN tutorial (pytorch/pytorch#39141): G_loss from D's output, then
    opt_D.step(), then G_loss.backward()."""
    source = """
    import torch
    def train(G, D, real_batches):
        opt_D = torch.optim.Adam(D.parameters(), lr=1e-4)
        opt_G = torch.optim.Adam(G.parameters(), lr=1e-4)
        for real in real_batches:
            fake = G(torch.randn(64, 5))
            prob_real = D(real)
            prob_fake = D(fake)
            D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
            G_loss = torch.mean(torch.log(1.0 - prob_fake))
            opt_D.zero_grad()
            D_loss.backward(retain_graph=True)
            opt_D.step()
            opt_G.zero_grad()
            G_loss.backward()  # expect: TD228
            opt_G.step()
    """
    assert_marked(source, "TD228")
    (found,) = lint_findings(source, "TD228")
    assert "`G_loss` (line 11) is computed through `D`" in found.message
    assert "`opt_D.step()` (line 14)" in found.message and found.fix_hint


def test_an_actor_loss_through_the_critic_in_a_method_is_flagged() -> None:
    source = """
    import torch
    class Agent:
        def __init__(self, actor, critic):
            self.actor, self.critic = actor, critic
            self.actor_opt = torch.optim.Adam(self.actor.parameters())
            self.critic_opt = torch.optim.Adam(self.critic.parameters())
        def update(self, batches):
            for s, a, target in batches:
                critic_loss = (self.critic(s, a) - target).pow(2).mean()
                q_pi = self.critic(s, self.actor(s))
                actor_loss = -q_pi.mean()
                self.critic_opt.zero_grad()
                critic_loss.backward()
                self.critic_opt.step()
                self.actor_opt.zero_grad()
                actor_loss.backward()  # expect: TD228
                self.actor_opt.step()
    """
    assert_marked(source, "TD228")


def test_correct_orders_are_quiet() -> None:
    """The generator stepped first (D's loss reads it only through detach), a loss
    recomputed after the step, independent models, and a step with no backward before
    it (TD204's)."""
    source = """
    import torch
    def generator_first(G, D, batches, bce):
        opt_G = torch.optim.Adam(G.parameters())
        opt_D = torch.optim.Adam(D.parameters())
        for real in batches:
            fake = G(torch.randn(8, 4))
            d_loss = bce(D(real), 1.0) + bce(D(fake.detach()), 0.0)
            g_loss = bce(D(fake), 1.0)
            opt_G.zero_grad()
            g_loss.backward()
            opt_G.step()
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
    def recomputed(G, D, batches):
        opt_G = torch.optim.Adam(G.parameters())
        opt_D = torch.optim.Adam(D.parameters())
        for real in batches:
            fake = G(torch.randn(8, 4))
            g_loss = -D(fake).mean()
            d_loss = D(fake.detach()).mean() - D(real).mean()
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
            g_loss = -D(fake).mean()
            opt_G.zero_grad()
            g_loss.backward()
            opt_G.step()
    def independent(a, b, batches):
        opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
        opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
        for x in batches:
            loss_a = a(x).mean()
            loss_b = b(x.detach()).mean()
            opt_a.zero_grad()
            loss_a.backward()
            opt_a.step()
            opt_b.zero_grad()
            loss_b.backward()
            opt_b.step()
    def detached_values(G, D, batches):
        opt_G = torch.optim.Adam(G.parameters())
        opt_D = torch.optim.Adam(D.parameters())
        for real in batches:
            fake = G(torch.randn(8, 4))
            weight = D(real).mean().item()
            g_loss = weight * fake.pow(2).mean()
            d_loss = D(real).mean()
            opt_D.zero_grad()
            d_loss.backward()
            opt_D.step()
            opt_G.zero_grad()
            g_loss.backward()
            opt_G.step()
    """
    assert_marked(source, "TD228")
