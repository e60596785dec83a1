"""What the reference pages are written from is documented: every recipe field has an attribute docstring, every CLI
command a docstring and every parameter help, every reward parameter an `Args:` entry in its class docstring; and the
troubleshooting page names every module that raises a user error (exit 2). The page writers live in docs/hooks/."""

import dataclasses
import re
import sys

from paths import REPO

sys.path.insert(0, str(REPO / "docs" / "hooks"))

import cli_commands  # noqa: E402
import recipe_keys  # noqa: E402
import reward_params  # noqa: E402


def test_every_recipe_key_has_a_docstring():
    assert recipe_keys.missing_docs() == []


def test_every_cli_command_and_parameter_has_help():
    assert cli_commands.missing_help() == []


def test_every_reward_parameter_is_documented():
    assert reward_params.missing_docs() == []


def test_the_recipe_keys_walk_every_section_and_nested_list():
    paths = {key.path for key in recipe_keys.keys()}
    assert {"model.source", "data.sources[].columns", "pairs.graded.scorer[].weight", "generation.server.gpus",
            "eval.rewards[].threshold", "launch.global_batch_size", "hub.private", "teacher.max_memory_gb",
            "method", "reference", "train", "peft"} <= paths
    assert not any(path.startswith(("method.", "reference.")) for path in paths)  # parsed from names, not mappings
    weak = next(key for key in recipe_keys.keys() if key.path == "pairs.weak")
    assert weak.same_as == "pairs.strong"  # GeneratorSection's keys are listed once


def test_attribute_docstrings_are_read_per_field():
    @dataclasses.dataclass
    class Section:
        documented: int = 1
        """What it does."""
        bare: str = "x"

    assert recipe_keys.attribute_docs(Section) == {"documented": "What it does."}


def test_args_entries_are_read_per_parameter():
    class Reward:
        """Scores things.

        Args:
            first: one line.
            second: two
                lines.
        """

        def __init__(self, first: int, second: str = "b", third: float = 0.0):
            pass

    summary, entries = reward_params.split_docstring(Reward)
    assert summary == "Scores things."
    assert entries == {"first": "one line.", "second": "two lines."}
    assert [p.name for p in reward_params.parameters(Reward)] == ["first", "second", "third"]


def test_the_troubleshooting_page_names_every_module_that_raises_a_user_error():
    page = (REPO / "docs" / "troubleshooting.md").read_text()
    raising = re.compile(r"(?<!class )\b(SmolalignError|RewardError)\(")
    modules = sorted(str(path.relative_to(REPO)) for folder in ("smolalign", "rewards")
                     for path in (REPO / folder).rglob("*.py") if raising.search(path.read_text()))
    assert len(modules) > 50
    assert [m for m in modules if f"`{m}`" not in page] == []


def test_the_rewards_page_has_a_row_for_every_built_in_reward():
    from rewards.registry import REWARDS

    page = (REPO / "docs" / "rewards.md").read_text()
    assert [name for name in REWARDS if f"\n| `{name}` |" not in page] == []
