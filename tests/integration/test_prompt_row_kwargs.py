"""An rl trainer renders every prompt with the recipe's template kwargs (TRL's config): a prompt row's own
chat_template_kwargs reach its prompt only as its think mode, carried as a flag. Other keys the rows set are warned
about before anything loads (they were dropped without a word); online DPO, whose TRL trainer renders with no
kwargs, refuses template.kwargs other than enable_thinking."""

from tiny_models import write_jsonl


def recipe(write_recipe, tiny_dir, data, method="grpo", kwargs=None):
    train = ({"num_generations": 2, "max_completion_length": 8} if method == "grpo" else
             {"max_new_tokens": 8, "max_length": 128})
    return str(write_recipe({"stage": "rl", "method": method, "model": {"source": str(tiny_dir)},
                             "template": {"name": "smollm3", "kwargs": kwargs or {}},
                             "data": {"sources": [{"path": str(data)}]}, "rewards": [{"name": "think_format"}],
                             "train": {"per_device_train_batch_size": 2, "max_steps": 1, **train}}))


def prompts(tmp_path, **row_kwargs):
    return write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": f"what is {i} plus 1", "solution": str(i + 1),
                                                     "chat_template_kwargs": {"enable_thinking": False, **row_kwargs}}
                                                    for i in range(4)])


def test_row_kwargs_grpo_does_not_render_are_warned_about(cli, write_recipe, tiny_dir, tmp_path):
    data = prompts(tmp_path, custom_instructions="Answer in French.")
    code, _, err = cli("rl", recipe(write_recipe, tiny_dir, data), "--dry-run")
    assert code == 0, err
    assert [line for line in err.splitlines() if line.startswith("warning: prompt rows set chat_template_kwargs "
                                                                 "custom_instructions")], err


def test_row_kwargs_that_only_set_the_mode_are_not_warned_about(cli, write_recipe, tiny_dir, tmp_path):
    code, _, err = cli("rl", recipe(write_recipe, tiny_dir, prompts(tmp_path, custom_instructions=None)), "--dry-run")
    assert code == 0 and "chat_template_kwargs" not in err, err


def test_online_dpo_refuses_template_kwargs_it_cannot_render(cli, write_recipe, tiny_dir, tmp_path):
    path = recipe(write_recipe, tiny_dir, prompts(tmp_path), method="online_dpo", kwargs={"date": "1 Jan 2026"})
    code, _, err = cli("rl", path, "--dry-run")
    assert code == 2 and "template.kwargs.date: TRL's online DPO renders its prompts with no template kwargs" in err, err
