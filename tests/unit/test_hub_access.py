"""A hub that does not answer is found out once, before the first download, and every hub source is then read from
the local caches: a dry run on a machine without network fails at once, naming the source and the reason, instead
of after huggingface_hub's retries (23 s of back-off per file). The endpoint here is a closed port on this machine
or a stand-in that answers; nothing reaches the network."""

import http.server
import os
import socket
import subprocess
import sys
import threading
import time

import pytest
import yaml

from smolalign import hub_access
from smolalign.errors import SmolalignError

RETRIES_BACK_OFF_S = 1 + 2 + 4 + 8 + 8
"""huggingface_hub's five retries of one request that cannot connect (utils/_http.py, http_backoff)."""


def closed_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


@pytest.fixture
def hub_online(monkeypatch):
    """This process as if HF_HUB_OFFLINE had never been set (the test session sets it), the probe not yet asked."""
    import datasets.config
    from huggingface_hub import constants

    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    hub_access._unreachable.cache_clear()
    yield monkeypatch
    hub_access._unreachable.cache_clear()


@pytest.fixture
def answering_hub():
    """An endpoint that answers every request with 404, as a hub mirror without the repository would."""
    asked = []

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_GET = do_HEAD

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()


def test_an_unreachable_hub_switches_the_libraries_to_their_caches(hub_online):
    import datasets.config
    from huggingface_hub import constants

    endpoint = f"http://127.0.0.1:{closed_port()}"
    hub_online.setattr(constants, "ENDPOINT", endpoint)
    reason = hub_access.offline_reason()
    assert reason is not None and reason.startswith(f"the hub ({endpoint}) does not answer from here")
    assert constants.is_offline_mode() and datasets.config.HF_HUB_OFFLINE


def test_a_hub_that_answers_is_left_online(hub_online, answering_hub):
    import datasets.config
    from huggingface_hub import constants

    endpoint, asked = answering_hub
    hub_online.setattr(constants, "ENDPOINT", endpoint)
    assert hub_access.offline_reason() is None and asked == ["/"]
    assert hub_access.offline_reason() is None and asked == ["/"]  # asked once per process
    assert not constants.is_offline_mode() and not datasets.config.HF_HUB_OFFLINE


def test_the_setting_is_read_as_huggingface_hub_reads_it(hub_online):
    for value, offline in (("1", True), ("true", True), ("ON", True), ("0", False), ("", False)):
        hub_online.setenv("HF_HUB_OFFLINE", value)
        assert hub_access.offline_by_setting() is offline, value
    hub_online.setenv("HF_HUB_OFFLINE", "yes")
    assert hub_access.offline_reason() == "HF_HUB_OFFLINE is set"


def test_an_uncached_hub_dataset_fails_at_once(hub_online):
    from huggingface_hub import constants

    from smolalign.inputs.data_sources import load_source
    from smolalign.recipe.data_schema import SourceSection

    endpoint = f"http://127.0.0.1:{closed_port()}"
    hub_online.setattr(constants, "ENDPOINT", endpoint)
    started = time.monotonic()
    with pytest.raises(SmolalignError, match=rf"^data source no-org/no-data: not in the local datasets cache, and the "
                                             rf"hub \({endpoint}\) does not answer from here"):
        load_source(SourceSection(path="no-org/no-data"))
    assert time.monotonic() - started < RETRIES_BACK_OFF_S / 2


def test_a_push_to_a_hub_that_does_not_answer_is_refused_before_training(hub_online):
    from huggingface_hub import constants
    from recipe_runs import run_of

    from smolalign.preflight.services import check_hub
    from smolalign.target import Target

    hub_online.setenv("HF_TOKEN", "hf_test")
    hub_online.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    raw = {"model": {"source": "HuggingFaceTB/SmolLM3-3B"}, "data": {"sources": [{"path": "chat.jsonl"}]},
           "hub": {"repo_id": "me/smol"}}
    here, cluster = Target(0, "this machine"), Target(2, "slurm")
    assert check_hub(run_of(raw, "sft", "test", target=cluster, check=False)) is None  # its nodes are not asked from here
    problem = check_hub(run_of(raw, "sft", "test", target=here, check=False))
    assert problem is not None and problem.startswith("hub.repo_id me/smol: the hub (http://127.0.0.1:")
    assert "could not be pushed after training" in problem


def test_a_dry_run_without_the_hub_fails_at_once_from_the_cli(tmp_path):
    """As a user on a machine without network runs it: a new process, an empty hub cache."""
    data = tmp_path / "chat.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}\n')
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"stage": "sft", "model": {"source": "no-org/no-model"},
                                      "data": {"sources": [{"path": str(data)}]}}))
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "smolalign", "sft", str(recipe), "--dry-run"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: model.source no-org/no-model: not a local directory and not in the hub cache, and "
                            f"the hub ({endpoint}) does not answer from here"), error
    assert took < RETRIES_BACK_OFF_S, took
