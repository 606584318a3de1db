"""A LightningModule: the framework calls training_step and owns zero_grad/backward/step."""

import lightning as L
import torch
from torch import nn
from torch.nn import functional as F


class LitClassifier(L.LightningModule):
    def __init__(self, features: int = 16, classes: int = 4, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(features, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean())

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def main() -> None:
    L.seed_everything(0)
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    data = torch.utils.data.TensorDataset(x, x[:, :4].argmax(dim=1))
    train = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True)
    valid = torch.utils.data.DataLoader(data, batch_size=64)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False)
    trainer.fit(LitClassifier(), train, valid)


if __name__ == "__main__":
    main()
