"""A distractor generator that already writes English: a decoder-only LM (by default the offline
SmolLM2-135M-Instruct, `model: smollm2`) fine-tuned on RACE's distractors.

Each example is the prompt of the DG attack (advrace.models.decoders.distractor_inputs: passage cut to
`max_passage_tokens`, question, correct answer) followed by one original distractor and the end
token; the loss is on the distractor tokens only, and logits are computed only for the last
positions of the left-padded batch, where the distractors are. A full step of SmolLM2 on a CPU
is slow, so `trainable_layers` trains only the top blocks (and what follows them, the final
norm); the frozen blocks then need no backward pass. The embeddings (tied to the output layer in
SmolLM2) stay frozen unless `train_embeddings`. `max_length` is not used: the prompt's length is
set by `max_passage_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from advrace.models.decoders.distractor_inputs import IGNORE, CausalFeature, collate_causal, training_features

from .base import Objective, dev_token_scores, register_objective


@dataclass(frozen=True)
class CausalLMSettings:
    max_passage_tokens: int = field(default=256, metadata={"min": 1})  # the passage is cut to this
    max_distractor_tokens: int = field(default=24, metadata={"min": 2})  # distractor tokens, with EOS
    distractors_per_question: int = field(default=3, metadata={"min": 1})  # drawn by seed if fewer
    trainable_layers: int = field(default=0, metadata={"min": 0})  # top blocks trained; 0: all
    train_embeddings: bool = False  # also train the (often tied) input and output embeddings


def decoder_layers(model):
    """The model's list of transformer blocks: the ModuleList as long as the config's layer count."""
    import torch  # deferred for start-up time

    n = model.config.num_hidden_layers
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n]
    if not lists:
        raise ValueError(f"{type(model).__name__}: no list of {n} transformer blocks found")
    return lists[0]


def freeze(model, trainable_layers: int, train_embeddings: bool = False):
    """Freeze the embeddings (unless `train_embeddings`) and all but the top `trainable_layers`
    blocks (0: none of them); parameters after the blocks (the final norm) stay trainable."""
    layers = decoder_layers(model)
    in_layers = {id(p) for p in layers.parameters()}
    top = {id(p) for layer in (layers[-trainable_layers:] if trainable_layers else layers)
           for p in layer.parameters()}
    embeddings = {id(p) for m in (model.get_input_embeddings(), model.get_output_embeddings())
                  if m is not None for p in m.parameters()}
    seen_layers = False
    for _, p in model.named_parameters():
        if id(p) in in_layers:
            seen_layers = True
            p.requires_grad = id(p) in top
        elif id(p) in embeddings or not seen_layers:  # embeddings, positions: before the blocks
            p.requires_grad = train_embeddings
        else:
            p.requires_grad = True
    return model


def plain_copy(model):
    """A model read from a GGUF file counts as quantized and refuses `save_pretrained`: the same
    weights in a plain model of its class."""
    import torch  # deferred for start-up time

    config = model.config
    for key in ("quantization_config",):
        if hasattr(config, key):
            delattr(config, key)
    with torch.random.fork_rng(devices=[]):
        plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    plain.tie_weights()
    return plain


class TopLayersCausalLM:
    """What the loop builds the model with: AutoModelForCausalLM, then `freeze`."""

    def __init__(self, settings: CausalLMSettings):
        self.settings = settings

    def _frozen(self, model):
        return freeze(model, self.settings.trainable_layers, self.settings.train_embeddings)

    def from_pretrained(self, path, **kwargs):
        from transformers import AutoModelForCausalLM  # deferred for start-up time

        model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
        if kwargs.get("gguf_file"):
            model = plain_copy(model)
        return self._frozen(model)

    def from_config(self, config):
        from transformers import AutoModelForCausalLM  # deferred for start-up time

        return self._frozen(AutoModelForCausalLM.from_config(config))


@register_objective
class CausalLM(Objective):
    name = "causal_lm"
    Settings = CausalLMSettings
    metric, label = "dev_token_accuracy", "dev token accuracy"
    architecture = "AutoModelForCausalLM"
    summary = "a decoder-only LM (default SmolLM2) as the distractor generator"
    feature_class = CausalFeature

    def model_class(self):
        return TopLayersCausalLM(self.settings)

    def features(self, tokenizer, examples, seed, dev=False):
        s = self.settings
        return training_features(tokenizer, examples, s.max_passage_tokens, s.max_distractor_tokens,
                                 s.distractors_per_question, seed)

    def collate(self, features, pad_token_id):
        return collate_causal(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        """Teacher-forced next-token accuracy and loss per token on the dev distractors."""
        import torch  # deferred for start-up time

        def score(batch):
            index, labels = batch.pop("index"), batch.pop("labels")
            logits = model(**batch).logits[:, :-1].float()
            gold = labels[:, 1:]
            scored = gold != IGNORE
            safe = gold.clamp(min=0)
            hits = ((logits.argmax(-1) == safe) & scored).sum(-1).float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), safe, reduction="none")
            return index, hits, scored.sum(-1).float(), (nll * scored).sum(-1)

        return dev_token_scores(loader, accelerator, score)
