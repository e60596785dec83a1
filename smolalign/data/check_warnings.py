"""What the check before loading warns about and lets run: a recipe the libraries would treat silently in a way
the user did not mean (positions past the model's context, prompts cut for the loss, held-out rows nothing
evaluates). Each prints one `warning:` line on stderr, naming the keys and the lengths."""

import sys

from smolalign.models.config import model_positions
from smolalign.resolve import Run
from smolalign.templates.registry import MODE_KWARG


def warn_beyond_the_context(run: Run, longest_prompt: int | None = None) -> None:
    """The longest sequence the run can train on past the positions the model was built for
    (max_position_embeddings): positions never trained, which attention extrapolates to without an error. The bound
    is train.max_length, else (a generating method without it) the longest checked prompt + max_completion_length."""
    positions = model_positions(run.source())
    if run.settings.get("max_length"):
        bound, what = run.settings["max_length"], f"train.max_length {run.settings['max_length']:,}"
    elif longest_prompt and run.settings.get("max_completion_length"):
        bound = longest_prompt + run.settings["max_completion_length"]
        what = (f"the longest checked prompt ({longest_prompt:,} tokens) + train.max_completion_length "
                f"{run.settings['max_completion_length']:,}")
    else:
        return
    if positions and bound > positions:
        print(f"warning: {what} is beyond the {positions:,} positions the model was built for "
              "(max_position_embeddings): positions past them were never trained, and attention extrapolates to them "
              "without an error; lower it, or extend the model's context first (rope_scaling in its config)",
              file=sys.stderr)


def warn_held_out_unused(run: Run) -> None:
    """`data.eval_split` rows are kept out of training to be evaluated: warned about when nothing evaluates them
    (train.eval_strategy "no", TRL's default; a distillation trainer, which is given no held-out split)."""
    held = run.data.eval_split
    if not held:
        return
    if run.method_spec.distills:
        print(f"warning: data.eval_split {held:g} holds rows out of training, and the distillation trainers "
              "evaluate no held-out split: they are only left out; set data.eval_split: 0 to train on them",
              file=sys.stderr)
    elif str(getattr(run.settings["eval_strategy"], "value", run.settings["eval_strategy"])) == "no":
        print(f"warning: data.eval_split {held:g} holds rows out of training, and train.eval_strategy is \"no\": "
              "they are never evaluated; set train.eval_strategy: steps (with train.eval_steps) or epoch to "
              "evaluate them, or data.eval_split: 0 to train on them", file=sys.stderr)


def warn_prompts_cut(run: Run, longest_prompt: int, longest_data_answer: int = 0) -> None:
    """A generating method whose train.max_length bounds prompt + answer (online DPO in its loss; GOLD before the
    student samples, and for the data's own completions, which it trains whole): the longest checked prompt with the
    longest answer over it has its start cut, its system turn (and think flag) first. Warned about, naming the
    lengths."""
    settings = run.settings
    budget = "max_new_tokens" if settings.get("max_new_tokens") else "max_completion_length"
    max_length, answer = settings.get("max_length"), settings.get(budget)
    if not (max_length and answer) or longest_prompt + max(answer, longest_data_answer) <= max_length:
        return
    over = longest_prompt + max(answer, longest_data_answer) - max_length
    if run.method_spec.off_policy:
        longest = (f"train.{budget} {answer:,}" if answer >= longest_data_answer else
                   f"the longest checked completion of the data ({longest_data_answer:,} tokens, which GOLD keeps whole)")
        cut = (f"GOLD cuts a prompt that long from its start (up to {over:,} token(s), the system turn and its think "
               "flag first) before the student samples, and for the data's completions")
    else:
        longest = f"train.{budget} {answer:,}"
        cut = (f"a prompt that long has its start cut for the loss (up to {over:,} token(s)), though the policy "
               "answered the whole of it")
    print(f"warning: the longest checked prompt ({longest_prompt:,} tokens) + {longest} is over train.max_length "
          f"{max_length:,}: {cut}; raise train.max_length", file=sys.stderr)


def warn_row_kwargs_dropped(rows) -> None:
    """An rl trainer renders every prompt with the recipe's template kwargs (TRL's config): a prompt row's own
    chat_template_kwargs reach it only as its think mode (a flag). Other keys with a value in the checked rows
    (custom_instructions, xml_tools, ...) are warned about, naming them."""
    keys = sorted({key for row in rows for key, value in (row.get("chat_template_kwargs") or {}).items()
                   if key != MODE_KWARG and value not in (None, "", [], {})})
    if keys:
        print(f"warning: prompt rows set chat_template_kwargs {', '.join(keys)}, which the trainer does not render "
              f"per row (only {MODE_KWARG} reaches each prompt, as a flag): set them for every row in "
              "template.kwargs, or put what they say in the prompts", file=sys.stderr)
