"""The data check before anything loads (`--dry-run`, `launch slurm`, and a real run before its weights): for every
source, its first rows and a seeded random sample of the rest, rendered with the recipe's template and tokenized with
the model's tokenizer by the same encoders training uses, so a row that cannot render, a mask that trains no assistant
token, an end-of-turn left untrained or identical chosen and rejected answers stop the run before the GPU bill.

The fields of every row are checked too (`data.rows`; prompt rows always are, as they are read), up to
FIELD_CHECK_LIMIT rows; the sample is what is rendered and tokenized. The plan says what was read, and how long it
took.
"""

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from smolalign.data.check_warnings import warn_beyond_the_context, warn_prompts_cut, warn_row_kwargs_dropped
from smolalign.data.encode import Encoder
from smolalign.data.mixture import ORIGIN, decoded
from smolalign.data.preference import PreferenceEncoder, check_rows
from smolalign.data.prepare import Layout, encode_rows, prepare_split
from smolalign.data.prepare_preference import length_drops, pair_lengths
from smolalign.errors import SmolalignError
from smolalign.models.load import preflight_tokenizer
from smolalign.resolve import Run
from smolalign.templates.registry import refuse_unread_kwargs
from smolalign.templates.render import render

FIRST, RANDOM = 32, 32
"""Rows per source: the first FIRST, then RANDOM drawn (seeded by data.seed) from the rest."""
FIELD_CHECK_LIMIT = 200_000
"""Up to this many rows, the fields of every row are checked too (about 10 µs a row); above, only the sample's, and
the plan says so (training checks every row as it prepares it)."""


@dataclass
class Checked:
    rows: int
    sources: int
    seconds: float
    skipped: str = ""
    """Why the rows were not rendered ("" when they were)."""
    fields: int | None = None
    """Rows whose fields were checked (None: not separately; 0: the data was too large)."""
    total: int = 0
    held_out: int = 0
    """Rows of the held-out split (data.eval_split) rendered and tokenized too."""

    def describe(self) -> str:
        if self.skipped:
            return f"rows not rendered: {self.skipped}"
        fields = ""
        if self.fields is not None:
            fields = (f"; the fields of all {self.fields} row(s) checked" if self.fields else
                      f"; the fields of the other {self.total - self.rows} row(s) are checked when training "
                      "prepares them")
        held_out = f", and {self.held_out} held-out row(s)" if self.held_out else ""
        return (f"{self.rows} row(s) of {self.sources} source(s) rendered and tokenized (first {FIRST} + {RANDOM} "
                f"seeded random per source){held_out}{fields}, in {self.seconds:.1f} s")


def check_fields(dataset, problem_of) -> int:
    """Every row's fields, not rendered (`problem_of(row)`: "" or the problem); the first problem names its row.
    Returns how many rows were checked: 0 above FIELD_CHECK_LIMIT."""
    if len(dataset) > FIELD_CHECK_LIMIT:
        return 0
    for batch in dataset.iter(batch_size=1000):
        for index in range(len(batch[ORIGIN])):
            row = {key: values[index] for key, values in batch.items()}
            problem = problem_of(row)
            if problem:
                raise SmolalignError(f"data row {row[ORIGIN]}: {problem}")
    return len(dataset)


BAD_ROWS_NAMED = 5
"""A reward's refusal names this many rows; the count says how many more there are."""
PARALLEL_ABOVE = 2_000
"""Distinct values checked in one process up to this many (a gold answer takes 1-3 ms to parse); above, on every
core."""


def check_reward_rows(named_rewards: list, rows) -> None:
    """Every row against each built-in reward that checks rows (`row_problem(row)`, reading only its
    `required_columns`: math_accuracy's gold answer must parse with math-verify), so that a row no completion can be
    scored on is refused now rather than scored None for the whole run; `rows` are dicts with the `_origin` column.
    Each distinct value is checked once. Refused naming the reward, the problem and the first BAD_ROWS_NAMED rows."""
    for name, reward in named_rewards:
        problem_of = getattr(reward, "row_problem", None)
        if not callable(problem_of) or not type(reward).__module__.startswith("rewards."):
            continue
        read = list(getattr(reward, "required_columns", ()))
        table = rows.select_columns([ORIGIN, *read]) if hasattr(rows, "select_columns") else rows
        positions: dict[str, list[tuple[int, str]]] = {}
        distinct = []
        for index, row in enumerate(table):
            key = json.dumps([row.get(c) for c in read], default=str)
            if key not in positions:
                positions[key] = []
                distinct.append({c: row.get(c) for c in read})
            positions[key].append((index, row[ORIGIN]))
        bad = sorted((at, problem) for problem, places in zip(_problems(problem_of, distinct), positions.values(),
                                                               strict=True) if problem for at in places)
        if bad:
            others = ", ".join(origin for (_, origin), _ in bad[1:BAD_ROWS_NAMED])
            more = f"; also {others}" if others else ""
            total = f" ({len(bad)} rows in all)" if len(bad) > BAD_ROWS_NAMED else ""
            raise SmolalignError(f"reward {name}: data row {bad[0][0][1]}: {bad[0][1]}{more}{total}; fix or drop "
                                 "these rows")


def _problems(problem_of, rows: list[dict]) -> list[str]:
    cores = len(os.sched_getaffinity(0))
    if len(rows) <= PARALLEL_ABOVE or cores == 1:
        return [problem_of(row) for row in rows]

    with ProcessPoolExecutor(min(cores, 32)) as pool:
        return list(pool.map(problem_of, rows, chunksize=256))


def sample(dataset, seed: int):
    """The first FIRST rows of each source in `dataset` (by its `_origin` column) and RANDOM seeded others."""
    import numpy as np

    by_source: dict[str, list[int]] = {}
    for index, origin in enumerate(dataset[ORIGIN]):
        by_source.setdefault(origin.rpartition("#")[0], []).append(index)
    rng = np.random.default_rng(seed)
    chosen = []
    for indices in by_source.values():
        rest = indices[FIRST:]
        drawn = rng.choice(len(rest), size=min(RANDOM, len(rest)), replace=False) if rest else []
        chosen += indices[:FIRST] + [rest[int(i)] for i in sorted(drawn)]
    return dataset.select(chosen), len(by_source)


def tokenizer_for(run: Run):
    """(tokenizer, template), or None with the reason when only a download would give the tokenizer."""
    source = run.source()
    found = preflight_tokenizer(run.recipe.model, run.recipe.template.name, source, run.target)
    if found is None:
        return None, (f"model.source {source.label} is a hub id not in this machine's cache: it and its tokenizer "
                      "were not checked (a dry run downloads nothing)")
    refuse_unread_kwargs(found[1], run.recipe.template.kwargs)
    return found, ""


def check_mixture(run: Run, mixture, make_checks) -> Checked:
    """What every check of a mixture shares: the tokenizer (or why it was not checked), every row's fields in both
    splits, a sample of the training rows, the time taken. `make_checks(tokenizer, template)` gives (row_problem,
    check_sample): the problem with one row's fields (None when it has none), and the check of the sampled rows as
    the stage's preparation would treat them (`check_sample(rows, split)`, for a sample of each split)."""
    start = time.perf_counter()
    found, skipped = tokenizer_for(run)
    if found is None:
        return Checked(0, len(mixture.rows_per_source), 0.0, skipped)
    row_problem, check_sample = make_checks(*found)
    warn_beyond_the_context(run)
    rows, sources = sample(mixture.train, run.data.seed)
    fields = sum(check_fields(split, row_problem) for split in (mixture.train, mixture.eval) if split)
    check_sample(rows, "checked training")
    held_out = 0
    if mixture.eval is not None and len(mixture.eval):
        held_out_rows, _ = sample(mixture.eval, run.data.seed)
        check_sample(held_out_rows, "checked held-out")
        held_out = len(held_out_rows)
    return Checked(len(rows), sources, time.perf_counter() - start, fields=fields,
                   total=len(mixture.train) + len(mixture.eval or []), held_out=held_out)


def check_sft_rows(run: Run, mixture) -> Checked:
    """Render, tokenize, mask and check a sample of an SFT mixture as `prepare_sft_data` would."""
    layout = Layout.from_settings(run.settings)

    def checks(tokenizer, template):
        encoder = Encoder(tokenizer, template, mixture.format, layout.loss, run.recipe.template.kwargs)
        return encoder.row_problem, lambda rows, split: prepare_split(rows, encoder, layout, run.data.on_untrained,
                                                                       split=split)
    return check_mixture(run, mixture, checks)


def check_preference_rows(run: Run, mixture) -> Checked:
    """Render, tokenize and check a sample of preference (or unpaired) rows as `prepare_preference_data` would."""
    names = ("chosen", "rejected") if mixture.format == "preference" else ("completion",)

    def checks(tokenizer, template):
        encoder = PreferenceEncoder(tokenizer, template, mixture.format, template_kwargs=run.recipe.template.kwargs,
                                    whole_turns=run.method_spec.scorer)

        def row_problem(row):
            return encoder.pair_problem(row, decoded(row.get("prompt")), [decoded(row.get(n)) for n in names], names)
        def check_sample(rows, split):
            encoded, _ = check_rows(encode_rows(rows, encoder), run.data.on_untrained)
            prompt, longest = pair_lengths(encoded, mixture.format)
            whole = run.method_spec.scorer
            check_length_budget(longest if whole else prompt, run.settings["max_length"], whole=whole)
        return row_problem, check_sample
    return check_mixture(run, mixture, checks)


def check_length_budget(lengths, max_length: int | None, *, whole: bool = False) -> None:
    """The checked rows' lengths (in tokens, rendered with the template) against a preference run's
    train.max_length, by the rule preparation drops rows by (`length_drops`): the prompts, or, for a reward model
    (`whole`), each row's longer side. Refused when every checked row would be dropped (training would have no row
    left, after generating its pairs where it does), warned about when some would."""
    import numpy as np

    lengths = np.asarray(lengths, dtype=np.int64)
    if max_length is None or not len(lengths):
        return
    dropped = int(length_drops(lengths, lengths, max_length, whole).sum())
    what = "the longer side (prompt + answer) of" if whole else "the prompt of"
    rule = "is longer than it" if whole else "fills it alone"
    if dropped == len(lengths):
        raise SmolalignError(f"train.max_length {max_length}: {what} every checked row {rule} (the shortest is "
                             f"{int(lengths.min()):,} tokens rendered with the template, the mean "
                             f"{lengths.mean():,.0f}), so training would drop every row; raise train.max_length")
    if dropped:
        print(f"warning: train.max_length {max_length}: {what} {dropped} of the {len(lengths)} checked rows "
              f"{rule}; training drops such rows", file=sys.stderr)


def completion_tokens(tokenizer, completion) -> int:
    """A data row's reference completion in tokens (its text, and the end of turn after it)."""
    completion = decoded(completion)
    text = completion if isinstance(completion, str) else "".join(str(m.get("content") or "") for m in completion)
    return len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1


def check_prompt_rows(run: Run, dataset, seed: int, kwargs: dict) -> Checked:
    """Render and tokenize a sample of prompt rows (`prompt` as messages, `_origin`) with the generation prompt, as
    the generating trainer (rl) or pair generation (po) will; their lengths are then checked against what the stage
    trains: a po run's pairs answering them (`check_length_budget`), an rl run's prompt and answer under its loss's
    train.max_length (`warn_prompts_cut`)."""
    start = time.perf_counter()
    found, skipped = tokenizer_for(run)
    if found is None:
        return Checked(0, 0, 0.0, skipped)
    tokenizer, template = found
    rows, sources = sample(dataset, seed)
    specials = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    lengths = []
    for row in rows:
        row_kwargs = {**kwargs, **(row.get("chat_template_kwargs") or {})}
        try:
            text, _ = render(template, row["prompt"], add_generation_prompt=True, special_tokens=specials,
                             **row_kwargs)
        except SmolalignError as exc:
            raise SmolalignError(f"prompt row {row[ORIGIN]}: {exc}") from None
        lengths.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
        if not lengths[-1]:
            raise SmolalignError(f"prompt row {row[ORIGIN]}: the prompt renders to no tokens")
    if run.recipe.stage == "po":
        check_length_budget(lengths, run.settings["max_length"])
    else:
        data_answers = [completion_tokens(tokenizer, row["completion"]) for row in rows
                        if run.method_spec.off_policy and row.get("completion") is not None]
        warn_prompts_cut(run, max(lengths, default=0), max(data_answers, default=0))
        warn_row_kwargs_dropped(rows)
    warn_beyond_the_context(run, max(lengths, default=0))
    return Checked(len(rows), sources, time.perf_counter() - start)
