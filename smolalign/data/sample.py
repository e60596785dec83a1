"""The data check before anything loads (`--dry-run`, `launch slurm`, and a real run before its weights): for every
source, its first rows and a seeded random sample of the rest, rendered with the recipe's template and tokenized with
the model's tokenizer by the same encoders training uses, so a row that cannot render, a mask that trains no assistant
token, an end-of-turn left untrained or identical chosen and rejected answers stop the run before the GPU bill.

Every row of every source is still checked for its structure when the mixture is read (`data.rows`); the sample is
what is rendered and tokenized. The plan says what was read, and how long it took.
"""

import time
from dataclasses import dataclass

from smolalign.data.mixture import ORIGIN
from smolalign.errors import SmolalignError

FIRST, RANDOM = 32, 32
"""Rows per source: the first FIRST, then RANDOM drawn (seeded by data.seed) from the rest."""


@dataclass
class Checked:
    rows: int
    sources: int
    seconds: float
    skipped: str = ""
    """Why the rows were not rendered ("" when they were)."""

    def describe(self) -> str:
        if self.skipped:
            return f"rows not rendered: {self.skipped}"
        return (f"{self.rows} row(s) of {self.sources} source(s) rendered and tokenized (first {FIRST} + {RANDOM} "
                f"seeded random per source) in {self.seconds:.1f} s")


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


def tokenizer_for(recipe):
    """(tokenizer, template), or None with the reason when only a download would give the tokenizer."""
    from smolalign.models.load import preflight_tokenizer
    from smolalign.models.sources import source_of

    source = source_of(recipe)
    found = preflight_tokenizer(recipe.model, recipe.template.name, source)
    if found is None:
        return None, (f"model.source {source.label} is a hub id not in this machine's cache, so neither it nor "
                      "its tokenizer was checked (a dry run downloads nothing)")
    return found, ""


def check_sft_rows(recipe, mixture) -> Checked:
    """Render, tokenize, mask and check a sample of an SFT mixture as `prepare_sft_data` would."""
    from smolalign.data.encode import Encoder
    from smolalign.data.prepare import Layout, prepare_split

    start = time.perf_counter()
    found, skipped = tokenizer_for(recipe)
    if found is None:
        return Checked(0, len(mixture.rows_per_source), 0.0, skipped)
    tokenizer, template = found
    layout = Layout.from_recipe(recipe)
    rows, sources = sample(mixture.train, recipe.data.seed)
    encoder = Encoder(tokenizer, template, mixture.format, layout.loss, recipe.template.kwargs)
    prepare_split(rows, encoder, layout, recipe.data.on_untrained)
    return Checked(len(rows), sources, time.perf_counter() - start)


def check_preference_rows(recipe, mixture) -> Checked:
    """Render, tokenize and check a sample of preference (or unpaired) rows as `prepare_preference_data` would."""
    from smolalign.data.preference import PreferenceEncoder, check_rows
    from smolalign.data.prepare import encode_rows

    start = time.perf_counter()
    found, skipped = tokenizer_for(recipe)
    if found is None:
        return Checked(0, len(mixture.rows_per_source), 0.0, skipped)
    tokenizer, template = found
    rows, sources = sample(mixture.train, recipe.data.seed)
    encoder = PreferenceEncoder(tokenizer, template, mixture.format, template_kwargs=recipe.template.kwargs)
    check_rows(encode_rows(rows, encoder), recipe.data.on_untrained)
    return Checked(len(rows), sources, time.perf_counter() - start)


def check_prompt_rows(recipe, dataset, seed: int, kwargs: dict) -> Checked:
    """Render and tokenize a sample of prompt rows (`prompt` as messages, `_origin`) with the generation prompt, as
    the generating trainer (or pair generation) will."""
    from smolalign.templates.render import render

    start = time.perf_counter()
    found, skipped = tokenizer_for(recipe)
    if found is None:
        return Checked(0, 0, 0.0, skipped)
    tokenizer, template = found
    rows, sources = sample(dataset, seed)
    specials = {k: v for k, v in tokenizer.special_tokens_map.items() if isinstance(v, str)}
    for row in rows:
        row_kwargs = {**kwargs, **(row.get("chat_template_kwargs") or {})}
        try:
            text, _ = render(template, row["prompt"], add_generation_prompt=True, special_tokens=specials,
                             **row_kwargs)
        except SmolalignError as exc:
            raise SmolalignError(f"prompt row {row[ORIGIN]}: {exc}") from None
        if not tokenizer(text, add_special_tokens=False)["input_ids"]:
            raise SmolalignError(f"prompt row {row[ORIGIN]}: the prompt renders to no tokens")
    return Checked(len(rows), sources, time.perf_counter() - start)
