"""A model's size and shape for the estimates, read from its config without loading weights: accelerate builds the
model on the meta device (`init_empty_weights`) and measures it (`calculate_maximum_sizes`); the config gives the
shapes activations follow. Run by every plan (`smolalign sft RECIPE --dry-run`)."""

from dataclasses import dataclass, field

from smolalign.errors import SmolalignError
from smolalign.models.config import read_config


@dataclass(frozen=True)
class ModelDims:
    params: int
    largest_layer: int
    """Parameters of the largest single module (accelerate's measure; ZeRO-3 gathers one at a time)."""
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    linears: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """Linear layers inside the decoder blocks by name (q_proj, ...): (in features, out features, how many)."""

    @property
    def layer_params(self) -> int:
        return sum(i * o * n for i, o, n in self.linears.values()) // max(self.layers, 1) + 2 * self.hidden

    def lora_params(self, r: int, targets) -> int:
        """Trainable parameters of LoRA adapters of rank `r` on `targets` (names, `all-linear`, or None: PEFT's
        default for Llama-like models, q_proj and v_proj)."""
        if targets in (None, "all-linear"):
            names = set(self.linears) if targets == "all-linear" else {"q_proj", "v_proj"}
        elif isinstance(targets, str):
            names = {n for n in self.linears if n == targets or n.endswith(targets)}
        else:
            names = set(targets)
        return sum(r * (i + o) * n for name, (i, o, n) in self.linears.items() if name in names)


def dims_from_model(model) -> ModelDims:
    """Dims of a model built on the meta device (or a real one: only shapes are read)."""
    import torch
    from accelerate.utils import calculate_maximum_sizes

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    params = sum(p.numel() for p in model.parameters())
    _, (largest_bytes, _) = calculate_maximum_sizes(model)
    bytes_per = next(model.parameters()).element_size()
    linears: dict[str, list[int]] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and ".layers." in f".{name}":
            entry = linears.setdefault(name.rsplit(".", 1)[-1], [module.in_features, module.out_features, 0])
            entry[2] += 1
    heads = config.num_attention_heads
    return ModelDims(
        params=params, largest_layer=largest_bytes // bytes_per, layers=config.num_hidden_layers,
        hidden=config.hidden_size, intermediate=getattr(config, "intermediate_size", 4 * config.hidden_size),
        heads=heads, kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads, vocab=config.vocab_size,
        linears={k: tuple(v) for k, v in linears.items()})


def dims_from_config(config) -> ModelDims:
    """Dims of a transformers config: the model built on the meta device, no memory used."""
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM

    with init_empty_weights():
        model = AutoModelForCausalLM.from_config(config)
    model.tie_weights()  # not done on the meta device; untied, a tied model would count its embeddings twice
    return dims_from_model(model)


def read_dims(source, key: str = "model.source") -> ModelDims | None:
    """Dims of a resolved model source; None when its config cannot be had offline (see read_config)."""
    spec = source.location
    config = read_config(source, key)
    if config is None:
        return None
    try:
        return dims_from_config(config)
    except (ValueError, KeyError, AttributeError) as exc:
        raise SmolalignError(f"{key} {spec}: its config does not describe a causal language model ({exc})") from None
