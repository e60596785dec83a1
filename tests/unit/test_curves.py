"""curves.png and `smolalign plot`: every logged metric is drawn with the values the run logged, related metrics share a
panel, several runs overlay, and a missing matplotlib or a folder without metrics is one line, not a crash."""

import json
import sys

from smolalign.runs.curves import figure, run_labels, write_run_curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# The keys TRL 1.16 logs (DPOTrainer, GRPOTrainer, the trainer's end-of-training and evaluation entries).
DPO = [
    {"step": 1, "loss": 0.6931, "grad_norm": 1.25, "learning_rate": 5e-3, "rewards/chosen": 0.01,
     "rewards/rejected": -0.02, "rewards/accuracies": 0.5, "rewards/margins": 0.03, "logps/chosen": -50.5,
     "logps/rejected": -52.0, "logits/chosen": -1.0, "logits/rejected": -1.1, "epoch": 0.5},
    {"step": 2, "loss": 0.61, "grad_norm": 0.75, "learning_rate": 2.5e-3, "rewards/chosen": 0.2,
     "rewards/rejected": -0.3, "rewards/accuracies": 1.0, "rewards/margins": 0.5, "logps/chosen": -49.0,
     "logps/rejected": -55.0, "logits/chosen": -0.9, "logits/rejected": -1.2, "epoch": 1.0},
    {"step": 2, "eval_loss": 0.65, "eval_rewards/margins": 0.4, "eval_runtime": 0.3, "eval_samples_per_second": 20.0,
     "eval_steps_per_second": 5.0, "epoch": 1.0},
    {"step": 2, "train_runtime": 3.2, "train_samples_per_second": 5.0, "train_steps_per_second": 0.6,
     "total_flos": 0.0, "train_loss": 0.65, "epoch": 1.0},
]
GRPO = [
    {"step": s, "loss": 0.0, "grad_norm": 0.5 * s, "learning_rate": 1e-5, "reward": 0.25 * s, "reward_std": 0.3,
     "rewards/accuracy/mean": 0.2 * s, "rewards/accuracy/std": 0.4, "rewards/think_format/mean": 1.0,
     "rewards/think_format/std": 0.0, "completions/mean_length": 100.0 + s, "completions/min_length": 30.0,
     "completions/max_length": 256.0, "completions/clipped_ratio": 0.25, "kl": 0.001 * s, "entropy": 0.9,
     "frac_reward_zero_std": 0.0, "num_tokens": 1000.0 * s, "clip_ratio/region_mean": float("nan")}
    for s in (1, 2, 3)
]


def drawn(fig) -> dict[str, dict[str, tuple[list, list]]]:
    """{panel title: {line label: (x, y)}} read back from the figure's artists."""
    return {axes.get_title(): {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
                               for line in axes.get_lines()} for axes in fig.axes}


def test_a_preference_run_draws_every_logged_metric_with_its_values():
    panels = drawn(figure([("po", DPO)]))
    assert list(panels) == ["loss", "learning rate", "grad norm", "rewards: chosen, rejected, margin", "log-probs",
                            "logits", "rewards/accuracies"]
    assert panels["loss"] == {"loss": ([1, 2], [0.6931, 0.61]), "eval_loss": ([2], [0.65])}
    assert panels["learning rate"] == {"learning_rate": ([1, 2], [5e-3, 2.5e-3])}
    assert panels["grad norm"] == {"grad_norm": ([1, 2], [1.25, 0.75])}
    assert panels["rewards: chosen, rejected, margin"] == {
        "rewards/chosen": ([1, 2], [0.01, 0.2]), "rewards/rejected": ([1, 2], [-0.02, -0.3]),
        "rewards/margins": ([1, 2], [0.03, 0.5]), "eval_rewards/margins": ([2], [0.4])}
    assert panels["log-probs"]["logps/rejected"] == ([1, 2], [-52.0, -55.0])


def test_an_rl_run_draws_the_reward_of_each_function_kl_and_lengths():
    panels = drawn(figure([("rl", GRPO)]))
    steps = [1, 2, 3]
    assert panels["reward"] == {"reward": (steps, [0.25, 0.5, 0.75])}
    assert panels["reward per function (mean)"] == {"rewards/accuracy/mean": (steps, [0.2, 0.4, 0.6000000000000001]),
                                                    "rewards/think_format/mean": (steps, [1.0] * 3)}
    assert set(panels["reward per function (std)"]) == {"rewards/accuracy/std", "rewards/think_format/std"}
    assert panels["kl"] == {"kl": (steps, [0.001, 0.002, 0.003])}
    assert panels["completion length (tokens)"]["completions/mean_length"] == (steps, [101.0, 102.0, 103.0])
    assert set(panels["completion length (tokens)"]) == {"completions/mean_length", "completions/min_length",
                                                         "completions/max_length"}
    assert {"completions/clipped_ratio", "entropy", "num_tokens", "reward_std", "frac_reward_zero_std"} <= set(panels)
    assert "clip_ratio/region_mean" not in panels  # logged as NaN only: nothing to draw


def test_a_step_logged_twice_keeps_the_resumed_runs_value():
    metrics = [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}, {"step": 2, "loss": 1.4}, {"step": 3, "loss": 1.0}]
    assert drawn(figure([("run", metrics)]))["loss"] == {"loss": ([1, 2, 3], [2.0, 1.4, 1.0])}


def write_run(directory, metrics):
    directory.mkdir(parents=True)
    (directory / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return directory


def test_plot_overlays_runs_into_a_real_png(cli, tmp_path):
    from matplotlib.image import imread

    first = write_run(tmp_path / "a" / "run", DPO)
    second = write_run(tmp_path / "b" / "run", [{**m, "loss": m["loss"] / 2} for m in DPO if "loss" in m])
    output = tmp_path / "out" / "both.png"
    code, _, err = cli("plot", first, second, "-o", output)
    assert code == 0, err
    assert output.read_bytes()[:8] == PNG_MAGIC
    height, width, _ = imread(output).shape
    assert height > 300 and width > 300
    # Two runs with one folder name are told apart by their parents; each run keeps its own values.
    assert run_labels([first, second]) == ["a/run", "b/run"] and run_labels([first, tmp_path / "po"]) == ["run", "po"]
    panels = drawn(figure([(str(first), DPO), (str(second), [{"step": 1, "loss": 0.3}])]))
    assert panels["loss"][f"{first}: loss"] == ([1, 2], [0.6931, 0.61])
    assert panels["loss"][f"{second}: loss"] == ([1], [0.3])
    code, _, err = cli("plot", first)
    assert code == 0 and (first / "curves.png").read_bytes()[:8] == PNG_MAGIC


def test_plot_refuses_a_folder_without_metrics_and_writes_nothing(cli, tmp_path):
    run = write_run(tmp_path / "run", DPO)
    (tmp_path / "empty").mkdir()
    code, _, err = cli("plot", run, tmp_path / "empty", "-o", tmp_path / "out.png")
    assert code == 2 and "empty: no metrics.jsonl" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out.png").exists()


def test_without_matplotlib_a_run_ends_with_a_note_and_plot_exits_2(cli, tmp_path, monkeypatch, capsys):
    run = write_run(tmp_path / "run", DPO)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    assert write_run_curves(run) is None
    assert "smolalign[plot]" in capsys.readouterr().err and not (run / "curves.png").exists()
    code, _, err = cli("plot", run)
    assert code == 2 and "smolalign[plot]" in err and not (run / "curves.png").exists()


def test_a_run_with_nothing_logged_gets_a_note(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    assert write_run_curves(run) is None and "no metrics.jsonl" in capsys.readouterr().err
