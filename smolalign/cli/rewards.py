"""`smolalign rewards test`: try a reward on a file of completions before spending any GPU time."""

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from rewards.registry import REWARDS
from smolalign.errors import SmolalignError
from smolalign.jsonl import read_jsonl

app = typer.Typer(help="Try verifiable rewards.", no_args_is_help=True)


@app.command()
def test(
    name: Annotated[str, typer.Argument(help=f"A built-in reward ({', '.join(REWARDS)}), model:PATH (a reward model) "
                                             "or path/to/file.py:function.")],
    completions: Annotated[Path, typer.Option("--completions", help="JSONL: one object per completion with "
                                                                    "`completion` (text or messages) and the columns "
                                                                    "the reward reads (solution, test_cases, prompt, "
                                                                    "completion_ids, ...).")],
    params: Annotated[str | None, typer.Option("--params", help="The reward's parameters as JSON.")] = None,
) -> None:
    """Each completion's score and the time it took."""
    from rewards.registry import check_team_reward, is_user_reward, required_columns, resolve_reward

    try:
        parsed = json.loads(params) if params else {}
    except json.JSONDecodeError as exc:
        raise SmolalignError(f"--params is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise SmolalignError("--params must be a JSON object, e.g. '{\"gold_column\": \"answer\"}'")
    reward = resolve_reward(name, parsed)
    if hasattr(reward, "probe"):  # a judge: its server answers, or nothing is tried
        reward.probe()
    rows = read_rows(completions)
    for column in required_columns(reward):
        missing = [i for i, row in enumerate(rows) if column not in row]
        if missing:
            raise SmolalignError(f"{completions}#{missing[0]}: reward {name} reads the column {column!r}")
    columns = sorted({key for row in rows for key in row} - {"completion"})
    check_team_reward(name, reward, columns, {k: v for k, v in rows[0].items() if k != "completion"})
    if getattr(reward, "pool", None) is not None:
        run_pooled(reward, rows, completions)
        return
    team = is_user_reward(name)
    total, scores = 0.0, []
    for index, row in enumerate(rows):
        start = time.perf_counter()
        score = score_row(name, reward, row, team, f"{completions}#{index}")
        elapsed = time.perf_counter() - start
        total += elapsed
        scores.append(score)
        shown = "None (skipped)" if score is None else f"{score:.4g}"
        typer.echo(f"#{index}  {shown:>14}  {elapsed * 1000:9.1f} ms  {preview(row['completion'])}")
    typer.echo(f"{summary(scores)}; {total * 1000:.1f} ms in all")


def score_row(name: str, reward, row: dict, team: bool, where: str):
    """One completion's score, called with the keywords training passes (a team's reward: checked to be one number or
    None, and any failure of its code refused naming the row)."""
    from rewards.registry import check_scores, describe_exception, trainer_extras

    columns = {k: [v] for k, v in row.items() if k not in ("completion", "prompt")}
    if "prompt" in row:
        columns["prompts"] = [row["prompt"]]
    try:
        scores = reward([row["completion"]], **trainer_extras(), **columns)
    except ValueError as exc:
        raise SmolalignError(f"{where}: {exc}") from None
    except Exception as exc:  # a team's own code, failing on this row's answer
        if not team:
            raise
        raise SmolalignError(f"{where}: reward {name} failed ({describe_exception(exc)})") from None
    if team:
        try:
            check_scores(name, scores, 1)
        except ValueError as exc:
            raise SmolalignError(f"{where}: {exc}") from None
    return scores[0]


def run_pooled(reward, rows: list[dict], completions: Path) -> None:
    """The code reward: every completion in one call, through the sandbox pool training uses, so that they run in
    parallel as they would in a GRPO step."""
    from rewards.code import parse_tests

    for index, row in enumerate(rows):
        try:
            parse_tests(row.get(reward.test_column))
        except ValueError as exc:
            raise SmolalignError(f"{completions}#{index}: {reward.test_column}: {exc}") from None
    names = sorted({key for row in rows for key in row} - {"completion", "prompt"})
    columns = {name: [row.get(name) for row in rows] for name in names}
    pool = reward.pool
    try:
        start, before = time.perf_counter(), pool.executions
        scores = reward([row["completion"] for row in rows], **columns)
        elapsed, executions = time.perf_counter() - start, pool.executions - before
    finally:
        reward.close()
    for index, (row, score) in enumerate(zip(rows, scores, strict=True)):
        shown = "None (skipped)" if score is None else f"{score:.4g}"
        typer.echo(f"#{index}  {shown:>14}  {preview(row['completion'])}")
    typer.echo(f"{summary(scores)}; {executions} sandboxed executions in {elapsed:.2f} s: "
               f"{executions / elapsed:.1f} executions/s (sandbox {pool.level}, {pool.workers} workers)")


def summary(scores: list) -> str:
    valid = [s for s in scores if s is not None]
    mean = f"{sum(valid) / len(valid):.4g}" if valid else "n/a"
    return f"{len(scores)} completions: mean {mean} over {len(valid)} scored, {len(scores) - len(valid)} None"


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        raise SmolalignError(f"--completions {path}: no such file")
    rows = []
    for number, row in read_jsonl(path, "--completions"):
        if "completion" not in row:
            raise SmolalignError(f"--completions {path}#{number}: each line needs a completion")
        rows.append(row)
    if not rows:
        raise SmolalignError(f"{path}: no completions")
    return rows


def preview(completion) -> str:
    text = completion if isinstance(completion, str) else json.dumps(completion, ensure_ascii=False)
    text = text.replace("\n", "⏎")
    return text if len(text) <= 60 else text[:57] + "..."
