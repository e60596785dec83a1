"""One chat turn with a model, using the tokenizer's own template and the generation config's EOS: what a user of
the saved model gets, so a trained model is checked the way it will be served."""

import sys

from smolalign.hardware import detect_hardware, generation_dtype
from smolalign.models.config import model_width
from smolalign.models.load import load_model, load_tokenizer
from smolalign.models.sources import resolve_model
from smolalign.recipe.schema import ModelSection
from smolalign.templates.registry import MODE_KWARG


def reply(model_source: str, message: str, *, think: bool | None = None, max_new_tokens: int = 128) -> str:
    """The model's greedy reply; `think` sets a hybrid template's reasoning mode (None: the template's default),
    with a warning when the model's template has no modes to set."""
    import torch

    section = ModelSection(source=model_source)
    tokenizer, template = load_tokenizer(section, "model")
    if think is not None and not template.is_hybrid:
        print(f"warning: {model_source}: its chat template has no reasoning modes, so --{'' if think else 'no-'}think "
              "changes nothing", file=sys.stderr)
    hardware = detect_hardware()
    source = resolve_model(section)
    model = load_model(section, generation_dtype("auto", hardware, model_width(source)), hardware, tokenizer, source)
    model.to("cuda" if hardware.on_gpu else "cpu").eval()
    inputs = tokenizer.apply_chat_template([{"role": "user", "content": message}], add_generation_prompt=True,
                                           **({} if think is None else {MODE_KWARG: think}), return_tensors="pt",
                                           return_dict=True).to(model.device)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
    return tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
