"""The preference data pipeline: mixture -> prompt/answer token ids -> row checks -> length budget -> the rows
TRL's DPO, KTO and ORPO trainers consume (their own tokenization is skipped; see `trainers.preference`).

KTO gets unpaired rows: `prompt/completion/label` data as it is, pairs split into a desirable and an undesirable
row each. KTO's sampler is sequential (its KL estimate needs that), so the rows are shuffled here, with data.seed.
"""

import sys

from smolalign.data.formats import PREFERENCE_FORMATS
from smolalign.data.mixture import Mixture, build_mixture
from smolalign.data.preference import PreferenceEncoder, check_rows
from smolalign.data.prepare import PreparedData, cache_key, encode_rows, load_prepared, save_prepared
from smolalign.errors import SmolalignError
from smolalign.progress import datasets_bars
from smolalign.recipe.method_table import method_spec
from smolalign.recipe.schema import Method
from smolalign.resolve import Run
from smolalign.templates.registry import ChatTemplate


def require_preference_format(fmt: str, method: Method) -> None:
    if fmt not in PREFERENCE_FORMATS:
        raise SmolalignError(f"smolalign po trains on preference pairs (prompt/chosen/rejected) or, for kto, unpaired "
                             f"rows (prompt/completion/label); the data's format is {fmt}")
    if fmt == "unpaired" and not method_spec("po", method).unpaired:
        raise SmolalignError("unpaired rows (prompt/completion/label) train only with method: kto (or "
                             f"apo_zero_unpaired); the {method.trainer} trainer needs prompt/chosen/rejected pairs")


def prepare_preference_data(run: Run, tokenizer, template: ChatTemplate, mixture: Mixture | None = None, *,
                            prepared_by_another: bool = False) -> PreparedData:
    """Train (and held-out) pairs, or KTO rows, as the trainer consumes them, kept in smolalign's cache under a key
    of what they depend on; `prepared_by_another`: see prepare.load_prepared."""
    datasets_bars()
    recipe, unpaired, max_length = run.recipe, run.method_spec.unpaired, run.settings["max_length"]
    key = cache_key(run, {"method": recipe.method.trainer, "unpaired": unpaired, "max_length": max_length},
                    tokenizer, template)
    if (found := load_prepared(key, prepared_by_another=prepared_by_another)) is not None:
        if unpaired:
            warn_unbalanced_labels(found.stats["train"], run.settings)
        return found
    mixture = mixture or build_mixture(run.data)
    require_preference_format(mixture.format, recipe.method)
    encoder = PreferenceEncoder(tokenizer, template, mixture.format, template_kwargs=recipe.template.kwargs,
                                whole_turns=run.method_spec.scorer)
    workers = run.settings["dataset_num_proc"]
    stats: dict = {"format": mixture.format, "sources": {p: {"rows": n, "taken": k}
                                                          for p, (n, k) in mixture.rows_per_source.items()}}
    splits = {}
    for name, dataset in (("train", mixture.train), ("eval", mixture.eval)):
        if dataset is None:
            continue
        encoded, dropped = check_rows(encode_rows(dataset, encoder, workers), run.data.on_untrained)
        encoded, split_stats = _length_budget(encoded, mixture.format, max_length, run.method_spec.scorer)
        split_stats["dropped_identical_or_empty"] = dropped
        if unpaired:
            encoded = _as_unpaired(encoded) if mixture.format == "preference" else encoded
            encoded = encoded.shuffle(seed=run.data.seed).flatten_indices()
            split_stats["unpaired_rows"] = len(encoded)
            split_stats["desirable_rows"] = int(sum(encoded["label"]))
        if len(encoded) == 0:
            raise SmolalignError(f"no {name} rows are left after the checks ({describe_split(split_stats)})")
        splits[name], stats[name] = encoded, split_stats
    save_prepared(PreparedData(splits["train"], splits.get("eval"), stats, key))
    if unpaired:
        warn_unbalanced_labels(stats["train"], run.settings)
    return PreparedData(splits["train"], splits.get("eval"), {**stats, "cached": False}, key)


def warn_unbalanced_labels(stats: dict, settings) -> None:
    """KTO with desirable and undesirable rows in a ratio its loss weights do not balance (the KTO paper's Eq. 8:
    desirable_weight × desirable rows over undesirable_weight × undesirable rows within [1, 4/3]) is warned about
    with the weights that would, as TRL's own data preparation (which smolalign's replaces) does."""
    if "desirable_rows" not in stats:
        return
    desirable = max(stats["desirable_rows"], 1)
    undesirable = max(stats["unpaired_rows"] - stats["desirable_rows"], 1)
    good, bad = settings["desirable_weight"], settings["undesirable_weight"]
    if desirable == undesirable:
        return
    low, high = undesirable * bad / desirable, undesirable * bad / desirable * 1.33
    low_bad, high_bad = desirable * good / undesirable / 1.33, desirable * good / undesirable
    if not (round(low, 2) <= good <= round(high, 2) or round(low_bad, 2) <= bad <= round(high_bad, 2)):
        print(f"warning: {desirable:,} desirable and {undesirable:,} undesirable rows, which train.desirable_weight "
              f"{good:g} and train.undesirable_weight {bad:g} do not balance (the KTO paper's Eq. 8): set either "
              f"desirable_weight in [{low:.2f}, {high:.2f}] or undesirable_weight in [{low_bad:.2f}, {high_bad:.2f}]",
              file=sys.stderr)


def describe_split(stats: dict) -> str:
    """One split's stats in words, for the line a run prints before it trains."""
    means = ", ".join(f"{key.removesuffix('_tokens_mean')} {value:,.0f}" for key, value in stats.items()
                      if key.endswith("_tokens_mean"))
    text = f"{stats['rows']:,} rows (tokens on average: {means}), "
    if "longer_than_max_length" in stats:  # a reward model's: a side is dropped whole, never cut
        text += f"{stats['longer_than_max_length']:,} dropped with a side longer than train.max_length, "
    else:
        text += (f"{stats['truncated']:,} to be truncated, {stats['prompt_too_long']:,} dropped with a prompt of "
                 "train.max_length or more, ")
    text += f"{stats['dropped_identical_or_empty']:,} dropped as identical or empty"
    if "unpaired_rows" in stats:
        text += f"; {stats['unpaired_rows']:,} unpaired rows"
        if "desirable_rows" in stats:
            text += f" ({stats['desirable_rows']:,} desirable)"
    return text


def pair_lengths(encoded, fmt: str):
    """(prompt, prompt + longest answer) tokens of each encoded row, as arrays."""
    import numpy as np

    answers = ("chosen_ids", "rejected_ids") if fmt == "preference" else ("completion_ids",)
    prompt = np.array([len(ids) for ids in encoded["prompt_ids"]], dtype=np.int64)
    if not len(prompt):
        return prompt, prompt
    return prompt, np.max([[len(ids) for ids in encoded[a]] for a in answers], axis=0) + prompt


def length_drops(prompt, longest, max_length: int | None, whole: bool):
    """Which rows preparation drops for their length (`pair_lengths`): a prompt that alone fills train.max_length
    (the collator would cut every answer token), or, for a reward model (`whole`: each side is scored as one
    sequence, at its last token, which a cut would move), a side longer than train.max_length."""
    import numpy as np

    if max_length is None:
        return np.zeros(len(prompt), dtype=bool)
    return longest > max_length if whole else prompt >= max_length


def _length_budget(encoded, fmt: str, max_length: int | None, whole: bool):
    """Drop and count the rows `length_drops` names; count the rows the collator will truncate."""
    import numpy as np

    answers = ("chosen_ids", "rejected_ids") if fmt == "preference" else ("completion_ids",)
    prompt, longest = pair_lengths(encoded, fmt)
    stats = {"rows": len(encoded), "prompt_tokens_mean": float(prompt.mean()) if len(prompt) else 0.0}
    for answer in answers:
        stats[f"{answer.removesuffix('_ids')}_tokens_mean"] = float(np.mean([len(i) for i in encoded[answer]]))
    dropped = length_drops(prompt, longest, max_length, whole)
    if whole:
        stats.update(prompt_too_long=0, truncated=0, longer_than_max_length=int(dropped.sum()))
    else:
        stats["prompt_too_long"] = int(dropped.sum())
        stats["truncated"] = int(((longest > max_length) & ~dropped).sum()) if max_length is not None else 0
    if dropped.any():
        why = "a side longer than" if whole else "a prompt that alone fills"
        print(f"dropped {int(dropped.sum())} row(s) with {why} train.max_length {max_length}", file=sys.stderr)
        encoded = encoded.select(np.flatnonzero(~dropped))
    return encoded.select_columns(["prompt_ids", *answers, *(["label"] if fmt == "unpaired" else [])]), stats


def _as_unpaired(encoded):
    """Each pair -> (prompt, chosen, desirable) and (prompt, rejected, undesirable)."""
    def split(batch):
        n = len(batch["prompt_ids"])
        return {"prompt_ids": batch["prompt_ids"] * 2, "completion_ids": batch["chosen_ids"] + batch["rejected_ids"],
                "label": [True] * n + [False] * n}

    return encoded.map(split, batched=True, remove_columns=encoded.column_names, keep_in_memory=True)
