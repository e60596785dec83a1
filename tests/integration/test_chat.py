"""`smolalign chat MODEL... --message TEXT --think/--no-think` on a tiny model carrying SmolLM3's template: the prompt
the model is given is the template's, in the mode asked for (an empty think block prefilled for --no-think, none for
--think), greedy, and the reply is what the model generated after it; several models answer in turn, each as it
would alone."""

import shutil

import pytest
from paths import REPO


@pytest.fixture
def hybrid_model(tiny_dir, tmp_path):
    directory = tmp_path / "hybrid"
    shutil.copytree(tiny_dir, directory)
    shutil.copy(REPO / "chat_templates" / "smollm3.jinja", directory / "chat_template.jinja")
    return directory


@pytest.fixture
def generate_calls(monkeypatch):
    """The prompt (token ids) and sampling of every `generate` call, and what it returned."""
    from transformers.generation.utils import GenerationMixin

    calls, original = [], GenerationMixin.generate

    def recording(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        calls.append({"prompt": kwargs["input_ids"][0].tolist(), "do_sample": kwargs.get("do_sample"),
                      "output": output[0].tolist()})
        return output

    monkeypatch.setattr(GenerationMixin, "generate", recording)
    return calls


@pytest.mark.parametrize("think", [True, False])
def test_chat_prompts_in_the_mode_asked_for(cli, hybrid_model, generate_calls, think):
    from transformers import AutoTokenizer

    flag = "--think" if think else "--no-think"
    code, out, err = cli("chat", hybrid_model, "--message", "what is 1 plus 2", flag, "--max-new-tokens", "6")
    assert code == 0, err
    [call] = generate_calls
    tokenizer = AutoTokenizer.from_pretrained(hybrid_model)
    prompt = tokenizer.decode(call["prompt"])
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n" if not think else "<|im_start|>assistant\n")
    assert ("/no_think" if not think else "/think") in prompt  # the system turn states the mode
    assert "what is 1 plus 2" in prompt and call["do_sample"] is False
    reply = tokenizer.decode(call["output"][len(call["prompt"]):], skip_special_tokens=True)
    assert out.strip() == reply.strip()


def test_several_models_answer_in_turn_as_each_would_alone(cli, hybrid_model, generate_calls, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(hybrid_model, other)
    weights = load_file(other / "model.safetensors")
    noise = torch.Generator().manual_seed(0)
    save_file({name: w + 10 * w.float().std() * torch.randn(w.shape, generator=noise).to(w.dtype)
               for name, w in weights.items()}, other / "model.safetensors", metadata={"format": "pt"})
    asked = ("--message", "what is 1 plus 2", "--no-think", "--max-new-tokens", "6")
    code, out, err = cli("chat", hybrid_model, other, *asked)
    assert code == 0, err
    assert len(generate_calls) == 2
    assert generate_calls[0]["output"] != generate_calls[1]["output"]  # two models, two different replies
    expected = ""
    for model in (hybrid_model, other):
        code, alone, err = cli("chat", model, *asked)
        assert code == 0, err
        expected += f"{model}: {alone}"
    assert out == expected
