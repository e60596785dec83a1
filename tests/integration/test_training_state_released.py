"""A stage with an `eval:` section frees its training state before evaluating: when the evaluation starts, no model
the stage trained and no optimizer is alive any more (the evaluation, vLLM above all, needs that memory).

Only objects born during this run are counted: other test files sharing the worker process may leave their own."""

import gc
import weakref

import torch

from tests.tiny_models import chat_rows, write_jsonl


def test_the_trainers_model_and_optimizer_are_gone_when_the_evaluation_starts(cli, write_recipe, tiny_dir, tmp_path,
                                                                              monkeypatch):
    import transformers

    import smolalign.evaluation.run as evaluation_run
    import smolalign.stages.lifecycle as lifecycle

    trainers: list[weakref.ref] = []
    built = transformers.Trainer.__init__

    def remember(self, *args, **kwargs):
        built(self, *args, **kwargs)
        trainers.append(weakref.ref(self))

    monkeypatch.setattr(transformers.Trainer, "__init__", remember)
    gc.collect()
    earlier = weakref.WeakSet(o for o in gc.get_objects()
                              if isinstance(o, (transformers.PreTrainedModel, torch.optim.Optimizer)))

    def born_here(kind):
        return sum(isinstance(o, kind) and o not in earlier for o in gc.get_objects())

    seen = {}
    evaluate = evaluation_run.evaluate_stage

    def check_then_evaluate(evaluation, run_dir, model_dir):
        gc.collect()
        [trainer] = [t() for t in trainers]
        seen["trainer holds"] = [name for name, value in vars(trainer).items()
                                 if isinstance(value, (torch.nn.Module, torch.optim.Optimizer))]
        seen["live models"] = born_here(transformers.PreTrainedModel)
        seen["live optimizers"] = born_here(torch.optim.Optimizer)
        return evaluate(evaluation, run_dir, model_dir)

    monkeypatch.setattr(lifecycle, "evaluate_stage", check_then_evaluate)  # where a stage's finish calls it
    data = write_jsonl(tmp_path / "chat.jsonl", chat_rows(8))
    held_out = write_jsonl(tmp_path / "held_out.jsonl", [{"prompt": "what is 1 plus 1", "solution": "2"}])
    recipe = write_recipe({
        "model": {"source": str(tiny_dir)}, "template": {"name": "smollm3"}, "data": {"sources": [{"path": str(data)}]},
        "train": {"max_length": 256, "per_device_train_batch_size": 2, "max_steps": 2, "learning_rate": 1e-3,
                  "save_strategy": "no", "gradient_checkpointing": False},
        "eval": {"data": [{"path": str(held_out)}], "rewards": [{"name": "math_accuracy"}], "modes": ["no_think"],
                 "max_new_tokens": 2, "temperature": 0.0, "before": False}})
    code, out, err = cli("sft", recipe, "-o", tmp_path / "run")
    assert code == 0, err
    assert seen == {"trainer holds": [], "live models": 0, "live optimizers": 0}
    assert (tmp_path / "run" / "eval.json").is_file()
