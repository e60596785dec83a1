"""`model:PATH` rewards: the score of each (prompt, completion), computed in padded batches, equals a direct forward
pass of the same sequence-classification model on the conversation its own chat template renders."""

from pathlib import Path

import pytest
import torch

from rewards.registry import resolve_reward

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory) -> Path:
    from tiny_models import build_tokenizer
    from transformers import LlamaConfig, LlamaForSequenceClassification

    directory = tmp_path_factory.mktemp("tiny-rm")
    tokenizer = build_tokenizer(directory)
    tokenizer.chat_template = CHATML
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, num_labels=1,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = LlamaForSequenceClassification(config)
    torch.nn.init.normal_(model.score.weight, std=1.0)  # scores that differ visibly between texts
    model.save_pretrained(directory)
    return directory


def test_scores_equal_a_direct_forward_pass(reward_model_dir):
    from transformers import AutoTokenizer, LlamaForSequenceClassification

    prompts = [[{"role": "user", "content": "what is 2 plus 3"}],
               [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}],
               "how many are ten and one"]
    completions = ["2 + 3 = 5.", [{"role": "assistant", "content": "hi there, what is the question"}], "eleven"]
    reward = resolve_reward(f"model:{reward_model_dir}", {"batch_size": 2})
    scores = reward(completions=completions, prompts=prompts)

    tokenizer = AutoTokenizer.from_pretrained(reward_model_dir)
    model = LlamaForSequenceClassification.from_pretrained(reward_model_dir, dtype=torch.float32).eval()
    answers = ["2 + 3 = 5.", "hi there, what is the question", "eleven"]
    conversations = [prompts[0], prompts[1], [{"role": "user", "content": prompts[2]}]]
    expected = []
    for messages, answer in zip(conversations, answers, strict=True):
        text = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}], tokenize=False)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            expected.append(model(**ids).logits[0, 0].item())
    assert len({round(v, 4) for v in expected}) == 3
    assert scores == pytest.approx(expected, abs=1e-5)


def test_a_head_with_several_labels_is_refused(reward_model_dir, tmp_path):
    from transformers import AutoConfig

    from rewards.errors import RewardError

    config = AutoConfig.from_pretrained(reward_model_dir)
    config.num_labels = 3
    config.save_pretrained(tmp_path)
    with pytest.raises(RewardError, match="3 labels"):
        resolve_reward(f"model:{tmp_path}")
