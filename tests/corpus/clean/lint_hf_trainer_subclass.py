"""A Hugging Face Trainer subclass with a weighted loss: the Trainer owns the loop."""

import torch
from torch import nn
from transformers import Trainer


class WeightedLossTrainer(Trainer):
    """Class-weighted cross entropy for an imbalanced classification fine-tune."""

    def __init__(self, *args, class_weights: torch.Tensor, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.loss_fn = nn.CrossEntropyLoss(weight=class_weights)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = self.loss_fn(outputs.logits.view(-1, outputs.logits.size(-1)), labels.view(-1))
        return (loss, outputs) if return_outputs else loss

    def training_step(self, model, inputs, num_items_in_batch=None):
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss = self.compute_loss(model, inputs)
        self.accelerator.backward(loss)
        return loss.detach()


def main() -> None:
    torch.manual_seed(0)
    weights = torch.tensor([1.0, 4.0])
    print(
        f"a trainer class with class weights {weights.tolist()} is defined; "
        "Trainer(model=..., args=..., class_weights=weights) would fine-tune with it"
    )


if __name__ == "__main__":
    main()
