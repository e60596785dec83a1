"""A run's model card: README.md in the run directory and in its model/ (what a `hub:` push uploads), built with
huggingface_hub's ModelCard and ModelCardData from what the run directory holds: the manifest (stage, method, the
model it started from and that model's lineage, template, data, result), the resolved recipe, the logged metrics and
the evaluation (eval.json: the card's model-index and its intervals table). Written at the end of every run, and
again when `smolalign eval --card RUN_DIR` adds results."""

import json
from pathlib import Path

import yaml

from smolalign.atomic import write_atomically
from smolalign.errors import SmolalignError
from smolalign.evaluation.report import render_markdown
from smolalign.evaluation.run import EVAL_FILE
from smolalign.models.sources import BUNDLED_ORIGIN
from smolalign.runs.metrics import LOGGED_AT, read_metrics
from smolalign.runs.rundir import MANIFEST_FILE, MODEL_DIR, RECIPE_FILE, read_manifest

CARD_FILE = "README.md"
LIBRARY = "transformers"
SHOWN_SETTINGS = ("learning_rate", "lr_scheduler_type", "warmup_steps", "num_train_epochs", "max_steps",
                  "per_device_train_batch_size", "gradient_accumulation_steps", "max_length", "packing", "beta",
                  "loss_type", "num_generations", "max_completion_length", "temperature", "optim", "seed")
"""The effective training settings a reader looks for first; the whole resolved recipe follows them."""


def lineage(spec: str, revision: str | None = None) -> dict:
    """What a run's model card says it started from: `base_model` (a hub id where there is one: the source's own, the
    bundled file's origin, or the hub repository a parent run was pushed to; else the source's path), `license`
    where known, and `parent_run` when the source is another smolalign run's model (SFT -> PO -> RL)."""
    if spec in BUNDLED_ORIGIN:
        origin, license_id = BUNDLED_ORIGIN[spec]
        return {"base_model": origin, "license": license_id, "parent_run": None, "bundled": spec}
    path = Path(spec).expanduser()
    if path.is_dir() and (path.parent / MANIFEST_FILE).is_file():  # <run>/model of an earlier run
        try:
            parent = read_manifest(path.parent)
        except SmolalignError:  # a damaged record: the directory is still the parent, its details unknown
            parent = {}
        pushed = (parent.get("hub") or {}).get("repo_id")
        model = parent.get("model") or {}
        return {"base_model": pushed or str(path), "license": model.get("license"),
                "parent_run": str(path.parent.resolve()), "parent_stage": parent.get("stage")}
    if path.exists():
        return {"base_model": str(path), "license": _card_license(path), "parent_run": None}
    return {"base_model": spec, "license": None, "parent_run": None,
            **({"revision": revision} if revision else {})}


def _card_license(path: Path) -> str | None:
    """The license in a local model directory's own model card, if it has one."""
    card = path / "README.md"
    if not path.is_dir() or not card.is_file():
        return None
    from huggingface_hub import ModelCard

    try:
        return ModelCard.load(card).data.license
    except Exception:  # noqa: BLE001 - a README that is not a model card says nothing about the license
        return None


def lineage_chain(manifest: dict) -> list[dict]:
    """This run's ancestors, nearest first: each earlier smolalign run whose model the next one started from."""
    chain, seen = [], set()
    parent = (manifest.get("model") or {}).get("parent_run")
    while parent and parent not in seen and (Path(parent) / MANIFEST_FILE).is_file():
        seen.add(parent)
        try:
            earlier = read_manifest(Path(parent))
        except Exception:  # noqa: BLE001 - a damaged ancestor ends the chain; the card still names it
            chain.append({"run": parent})
            break
        chain.append({"run": parent, "stage": earlier.get("stage"), "method": (earlier.get("method") or {}).get("name"),
                      "from": (earlier.get("model") or {}).get("source")})
        parent = (earlier.get("model") or {}).get("parent_run")
    return chain


def eval_results(report: dict, label: str, dataset: str):
    """The model-index entries of one evaluated model: each metric's value in each mode."""
    from huggingface_hub import EvalResult

    results = []
    for mode, metrics in (report.get("results", {}).get(label) or {}).items():
        for metric, found in metrics.items():
            if found.get("value") is None:
                continue
            results.append(EvalResult(task_type="text-generation", dataset_type=dataset, dataset_name=dataset,
                                      metric_type=metric.replace(" ", "_").replace("@", "_at_"),
                                      metric_value=round(float(found["value"]), 4), metric_name=f"{metric} ({mode})"))
    return results


CARD_LABEL = "card_label"
"""eval.json's key naming the run's own model when `smolalign eval --card` wrote it."""


def _evaluated_label(report: dict) -> str | None:
    """The run's own model in an evaluation: as `eval --card` named it, `after` (a recipe's eval: section), else the
    last model evaluated."""
    labels = [m["label"] for m in report.get("models", [])]
    if report.get(CARD_LABEL) in labels:
        return report[CARD_LABEL]
    return "after" if "after" in labels else (labels[-1] if labels else None)


def build_card(run_dir: Path, repo_id: str | None = None):
    """The card of the run in `run_dir` (see the module docstring); `repo_id` when it is pushed to the hub."""
    from huggingface_hub import ModelCard, ModelCardData

    manifest = read_manifest(run_dir)
    recipe_text = (run_dir / RECIPE_FILE).read_text() if (run_dir / RECIPE_FILE).is_file() else ""

    recipe = yaml.safe_load(recipe_text) or {}
    model = manifest.get("model") or {}
    stage, method = manifest.get("stage") or "", (manifest.get("method") or {}).get("name") or recipe.get("method")
    name = repo_id.split("/")[-1] if repo_id else run_dir.name
    sources = [s for s in (recipe.get("data") or {}).get("sources") or [] if isinstance(s, dict)]
    report = json.loads((run_dir / EVAL_FILE).read_text()) if (run_dir / EVAL_FILE).is_file() else None
    label = _evaluated_label(report) if report else None
    dataset = ", ".join(s["path"] for s in (report or {}).get("settings", {}).get("data", [])) or "evaluation prompts"
    results = eval_results(report, label, dataset) if report and label else []
    data = ModelCardData(
        base_model=model.get("base_model") or model.get("source"), license=model.get("license"),
        datasets=[s["path"] for s in sources] or None, library_name=LIBRARY, pipeline_tag="text-generation",
        tags=["smolalign", "trl", *(t for t in (stage, method) if t)], model_name=name,
        eval_results=results or None)
    body = _body(run_dir, name, manifest, recipe, recipe_text, stage, method, sources, report, label, repo_id)
    return ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _body(run_dir, name, manifest, recipe, recipe_text, stage, method, sources, report, label, repo_id) -> str:
    model, template = manifest.get("model") or {}, manifest.get("template") or {}
    kwargs = (recipe.get("template") or {}).get("kwargs") or {}
    modes = {True: "think", False: "no_think"}.get(kwargs.get("enable_thinking"), "think and no_think (per row)")
    lines = [f"# {name}", "",
             f"Trained with [smolalign](https://github.com/smolalign/smolalign): `{stage}`"
             + (f" with `{method}`" if method else "") + f", from `{model.get('base_model') or model.get('source')}`"
             + (f" (revision `{model['revision']}`)" if model.get("revision") else "") + ".", "",
             "## What was trained", "", "| | |", "|---|---|", f"| stage | {stage} |",
             f"| method | {method or stage} |", f"| think modes | {modes} |",
             f"| chat template | {template.get('name', '')} (sha256 `{template.get('sha256', '')[:16]}`) |",
             f"| started from | `{model.get('source')}` |", ""]
    chain = lineage_chain(manifest)
    if chain:
        lines += ["## Lineage", "", f"1. this run: `{stage}`" + (f" ({method})" if method else "")]
        lines += [f"{i}. `{c.get('stage')}`" + (f" ({c['method']})" if c.get("method") else "") + f" in `{c['run']}`, "
                  f"from `{c.get('from')}`" for i, c in enumerate(chain, start=2)]
        lines.append("")
    lines += _data_lines(manifest, sources) + _settings_lines(recipe) + _result_lines(run_dir, manifest)
    if report and label:
        lines += ["## Evaluation", "", f"`{label}` is this model; mean [95% interval over prompts], "
                  f"{report.get('prompts')} prompts × {report.get('samples')} samples.", "",
                  render_markdown(report).rstrip(), ""]
    where = repo_id or str((run_dir / MODEL_DIR).resolve())
    lines += ["## Use it", "", "```python", "from transformers import AutoModelForCausalLM, AutoTokenizer", "",
              f'model_id = "{where}"', "tokenizer = AutoTokenizer.from_pretrained(model_id)",
              "model = AutoModelForCausalLM.from_pretrained(model_id)",
              'messages = [{"role": "user", "content": "What is 12 + 30?"}]',
              "for thinking in (True, False):  # /think and /no_think",
              "    inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, "
              "enable_thinking=thinking,", '                                           return_tensors="pt", '
              "return_dict=True)", "    output = model.generate(**inputs, max_new_tokens=256)",
              '    print(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))', "```",
              "", "## Recipe", "", "```yaml", recipe_text.rstrip(), "```", ""]
    return "\n".join(lines)


def _data_lines(manifest: dict, sources: list[dict]) -> list[str]:
    if not sources:
        return []
    stats = ((manifest.get("data") or {}).get("stats") or {}).get("train") or {}
    lines = ["## Data", "", "| source | weight |", "|---|---|"]
    lines += [f"| `{s['path']}`" + (f" ({s['name']})" if s.get("name") else "") + f" | {s.get('weight', 1.0):g} |"
              for s in sources]
    if stats:
        lines += ["", "Training rows after the mixture: " + ", ".join(f"{k} {v}" for k, v in stats.items()
                                                                     if isinstance(v, int | float))]
    return [*lines, ""]


def _settings_lines(recipe: dict) -> list[str]:
    train = recipe.get("train") or {}
    shown = [(k, train[k]) for k in SHOWN_SETTINGS if k in train]
    if not shown:
        return []
    return ["## Training settings", "", "| setting | value |", "|---|---|",
            *(f"| {k} | {v} |" for k, v in shown), "", "Every setting is in the recipe below.", ""]


def _result_lines(run_dir: Path, manifest: dict) -> list[str]:
    result = manifest.get("result") or {}
    logged = [m for m in read_metrics(run_dir) if "train_runtime" not in m]
    last = logged[-1] if logged else {}
    values = {k: v for k, v in last.items() if k not in ("step", LOGGED_AT) and isinstance(v, int | float)}
    if not result and not values:
        return []
    lines = ["## Results", "", "| | |", "|---|---|"]
    if result.get("global_step") is not None:
        lines.append(f"| optimizer steps | {result['global_step']} |")
    if result.get("train_loss") is not None:
        lines.append(f"| mean training loss | {result['train_loss']:.4g} |")
    lines += [f"| {k} (step {last['step']}) | {v:.4g} |" for k, v in list(values.items())[:12]]
    return [*lines, ""]


def write_cards(run_dir: Path, repo_id: str | None = None) -> None:
    """The card into the run directory and, once the model is saved, into its model/ (replacing TRL's stub)."""
    text = str(build_card(run_dir, repo_id))
    write_atomically(run_dir / CARD_FILE, text)
    if (run_dir / MODEL_DIR).is_dir():
        write_atomically(run_dir / MODEL_DIR / CARD_FILE, text)


def write_evaluation_card(run_dir: Path, report: dict, label: str) -> Path:
    """`smolalign eval --card RUN_DIR`: the report becomes the run's eval.json (naming `label`, its own model) and
    its cards are written again with it; returns the run directory's card."""
    write_atomically(run_dir / EVAL_FILE, json.dumps({**report, CARD_LABEL: label}, indent=2) + "\n")
    manifest = read_manifest(run_dir)
    write_cards(run_dir, (manifest.get("hub") or {}).get("repo_id"))
    return run_dir / CARD_FILE
