"""The judge reward against a stand-in OpenAI chat-completions server (tests/standins/openai_chat): scores parsed
from the judge's answers, None (never 0) for a timeout, a server error or an answer without a score, answers cached
on disk by content so that a second pass sends nothing, and a server that does not answer refused up front."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rewards.errors import RewardError
from rewards.registry import resolve_reward
from smolalign.ports import free_port

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "openai_chat"
RUBRIC = "Question: {prompt}\nAnswer: {completion}\nRate the answer. End with 'Score: N'."


@pytest.fixture
def judge_server(tmp_path, request):
    """The stand-in on a free port: (its /v1 address, the file of the requests it got); `indirect` parameters
    are its environment (STANDIN_API_KEY)."""
    port, record = free_port(), tmp_path / "requests.jsonl"
    extra = getattr(request, "param", None) or {}
    process = subprocess.Popen([sys.executable, str(STANDIN), str(port)], stdout=subprocess.PIPE, text=True,
                               env={"STANDIN_RECORD": str(record), "PATH": "/usr/bin:/bin", **extra})
    assert process.stdout.readline().strip() == "ready"
    yield f"http://127.0.0.1:{port}/v1", record
    process.kill()
    process.wait()


def sent(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.is_file() else []


def test_scores_none_and_caching(judge_server, tmp_path):
    url, record = judge_server
    judge = resolve_reward("judge", {"base_url": url, "model": "judge", "rubric": RUBRIC, "timeout": 1.5,
                                     "concurrency": 3, "cache_dir": str(tmp_path / "cache")})
    judge.probe()
    completions = ["good and good", "RAMBLE on", "SLOW one", "BROKEN", "plain"]
    prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(len(completions))]
    assert judge(completions=completions, prompts=prompts) == [2.0, None, None, None, 0.0]
    first = sent(record)
    assert len(first) == 5
    # the rubric reached the server with the prompt and the completion in place
    asked = {body["messages"][-1]["content"] for body in first}
    assert "Question: user: q0\nAnswer: good and good\nRate the answer. End with 'Score: N'." in asked
    assert all(body["model"] == "judge" and body["temperature"] == 0.0 for body in first)

    again = resolve_reward("judge", {"base_url": url, "model": "judge", "rubric": RUBRIC, "timeout": 1.5,
                                     "cache_dir": str(tmp_path / "cache")})
    assert again(completions=completions, prompts=prompts) == [2.0, None, None, None, 0.0]
    # answered ones (a score, or an answer without one) came from the cache; failures were asked again
    repeated = [body["messages"][-1]["content"] for body in sent(record)[5:]]
    assert sorted(text.split("Answer: ")[1].split("\n")[0] for text in repeated) == ["BROKEN", "SLOW one"]


def test_a_model_the_server_does_not_serve_is_refused_not_scored_none(judge_server, tmp_path):
    """A typo in params.model: every request would get 404 and every score None, and the run would train without
    the judge; the probe reads the server's model list, and a 404 in the run stops it."""
    url, _ = judge_server
    judge = resolve_reward("judge", {"base_url": url, "model": "judgee", "rubric": RUBRIC,
                                     "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(RewardError, match=r"serves judge, not params.model 'judgee' \(did you mean judge\?\)"):
        judge.probe()
    with pytest.raises(RewardError, match=r"refuses the request \(HTTP 404: The model `judgee` does not exist.\)"):
        judge(completions=["good"], prompts=[[{"role": "user", "content": "q"}]])


@pytest.mark.parametrize("judge_server", [{"STANDIN_ANY_MODEL": "1"}, {"STANDIN_NO_MODEL_LIST": "1"}],
                         indirect=True, ids=["lists-one-answers-any", "no-model-list"])
def test_a_server_that_answers_to_the_name_is_let_through(judge_server, tmp_path):
    """TGI and llama.cpp list one name and answer to any; a minimal server has no /models route at all."""
    url, _ = judge_server
    judge = resolve_reward("judge", {"base_url": url, "model": "meta-llama/Llama-3.1-8B-Instruct", "rubric": RUBRIC,
                                     "cache_dir": str(tmp_path / "cache")})
    judge.probe()


@pytest.mark.parametrize("judge_server", [{"STANDIN_API_KEY": "sesame"}], indirect=True)
def test_a_key_the_server_refuses_is_refused(judge_server, tmp_path, monkeypatch):
    url, _ = judge_server
    monkeypatch.setenv("JUDGE_KEY", "wrong")
    judge = resolve_reward("judge", {"base_url": url, "model": "judge", "rubric": RUBRIC, "api_key_env": "JUDGE_KEY",
                                     "cache_dir": str(tmp_path / "cache")})
    with pytest.raises(RewardError, match=r"HTTP 401: Incorrect API key provided.*api_key_env"):
        judge.probe()
    monkeypatch.setenv("JUDGE_KEY", "sesame")
    keyed = resolve_reward("judge", {"base_url": url, "model": "judge", "rubric": RUBRIC, "api_key_env": "JUDGE_KEY",
                                     "cache_dir": str(tmp_path / "cache")})
    keyed.probe()
    assert keyed(completions=["good"], prompts=[[{"role": "user", "content": "q"}]]) == [1.0]


def test_a_judge_that_does_not_answer_is_refused(tmp_path):
    judge = resolve_reward("judge", {"base_url": f"http://127.0.0.1:{free_port()}/v1", "model": "m",
                                     "rubric": RUBRIC, "cache_dir": str(tmp_path)})
    with pytest.raises(RewardError, match="does not answer"):
        judge.probe()


@pytest.mark.parametrize("params, message", [
    ({"model": "m", "rubric": RUBRIC}, "parameter 'base_url' is required"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": "no slot"}, "must contain {completion}"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": RUBRIC, "pattern": "score"}, "needs a group"),
    ({"base_url": "http://x/v1", "model": "m", "rubric": RUBRIC, "concurency": 2}, "did you mean concurrency"),
])
def test_bad_judge_parameters(params, message):
    with pytest.raises(RewardError, match=message):
        resolve_reward("judge", params)


def test_reward_model_that_does_not_exist_is_refused(tmp_path):
    with pytest.raises(RewardError, match="model:.*no such directory"):
        resolve_reward(f"model:{tmp_path / 'missing'}")


def test_a_causal_lm_is_not_a_reward_model(tiny_dir):
    with pytest.raises(RewardError, match="no classification head .*LlamaForCausalLM"):
        resolve_reward(f"model:{tiny_dir}")


def test_a_folder_that_holds_no_model_is_refused_as_not_loading(tmp_path):
    with pytest.raises(RewardError, match="model:.*does not load"):
        resolve_reward(f"model:{tmp_path}")
