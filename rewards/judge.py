"""`judge`: an LLM judge behind any OpenAI-compatible `/v1/chat/completions` endpoint (vLLM, TGI, a hosted API) as a
reward. The recipe's rubric is the user message, with `{prompt}` and `{completion}` filled in; the score is the last
number after "score" in the judge's answer (`pattern` changes that).

A timeout, an error answer or an answer with no score gives None (no reward for that sample, never 0). Answers are
cached on disk by the content of the request (judge model, messages, sampling), so a rerun or an evaluation of the
same completions pays once; at most `concurrency` requests are in flight. `probe()` asks the server's `/models`
before any work (smolalign's preflight calls it).

Try it: `smolalign rewards test judge --params '{"base_url": "http://127.0.0.1:8000/v1", "model": "m",
"rubric": "..."}' --completions F`.
"""

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rewards.errors import RewardError, suggest
from rewards.text import completion_text

DEFAULT_PATTERN = r"(?i)score\s*(?:is|:|=)?\s*(-?\d+(?:\.\d+)?)"
REFUSALS = (401, 403, 404)
"""HTTP answers that say the request itself is wrong (the key, the model's name, the address), not this one row."""


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(f"{m.get('role', 'user')}: {m.get('content', '')}" for m in prompt if isinstance(m, dict))
    return ""


def default_cache_dir() -> Path:
    """Beside smolalign's own cache (SMOLALIGN_CACHE) when set, else ~/.cache/smolalign/judge."""
    return Path(os.environ.get("SMOLALIGN_CACHE", Path.home() / ".cache" / "smolalign")) / "judge"


class Judge:
    """`judge`: an LLM judge's score for each completion (None on a timeout, an error or an answer with no score).

    Args:
        base_url: the server's API root, e.g. http://127.0.0.1:8000/v1.
        model: the judge's served model name.
        rubric: the user message sent to the judge, with `{completion}` (required) and `{prompt}` filled in.
        pattern: a regular expression whose group 1 captures the score in the judge's answer; default the last
            number after "score".
        system: a system message sent before the rubric; none by default.
        temperature: the judge's sampling temperature.
        max_tokens: the judge's answer budget.
        timeout: seconds to wait for one answer.
        concurrency: requests in flight at once.
        cache_dir: where answers are cached by request content; default ~/.cache/smolalign/judge (beside
            SMOLALIGN_CACHE when set).
        api_key_env: the environment variable holding the API key, sent as a bearer token; none sends no key.
    """

    def __init__(self, base_url: str, model: str, rubric: str, pattern: str = DEFAULT_PATTERN,
                 system: str | None = None, temperature: float = 0.0, max_tokens: int = 256, timeout: float = 60.0,
                 concurrency: int = 8, cache_dir: str | None = None, api_key_env: str | None = None):
        if "{completion}" not in rubric:
            raise ValueError("rubric must contain {completion} (and usually {prompt}), where the answer goes")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"pattern {pattern!r} is not a regular expression ({exc})") from None
        if compiled.groups < 1:
            raise ValueError(f"pattern {pattern!r} needs a group that captures the score")
        if concurrency < 1 or timeout <= 0:
            raise ValueError("concurrency must be at least 1 and timeout positive")
        key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not key:
            raise ValueError(f"api_key_env: the environment variable {api_key_env} is not set")
        self.base_url, self.model, self.rubric, self.pattern = base_url.rstrip("/"), model, rubric, compiled
        self.system, self.temperature, self.max_tokens = system, temperature, max_tokens
        self.timeout, self.concurrency = timeout, concurrency
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        self.__name__ = "judge"
        self.requests_sent = 0
        """Requests that went to the server (cache misses), for reports and tests."""

    def probe(self) -> None:
        """RewardError when the server does not answer, refuses the key (HTTP 401/403), or refuses the model: a name
        its model list lacks is tried with one one-token request, since some servers (TGI, llama.cpp) list one name
        and answer to any; a server without a model list (404 on /models) is let through. Each would make every
        score None."""
        request = urllib.request.Request(f"{self.base_url}/models", headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=min(self.timeout, 10)) as response:
                listed = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise self.refused(exc) from None
            return
        except (urllib.error.URLError, OSError) as exc:
            raise RewardError(f"reward judge: the server at {self.base_url} does not answer "
                              f"({getattr(exc, 'reason', exc)}); start it or fix params.base_url") from None
        except ValueError:  # not JSON: no model list to check against
            return
        data = listed.get("data") if isinstance(listed, dict) else None
        served = [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        if not served or self.model in served:
            return
        body = {**self.body("", "probe"), "max_tokens": 1}
        try:
            with urllib.request.urlopen(urllib.request.Request(
                    f"{self.base_url}/chat/completions", data=json.dumps(body).encode(), headers=self.headers,
                    method="POST"), timeout=self.timeout):
                return  # it answers to the name it does not list
        except urllib.error.HTTPError as exc:
            if exc.code not in (400, 404):
                return
            raise RewardError(f"reward judge: the server at {self.base_url} serves {', '.join(served)}, not "
                              f"params.model {self.model!r}{suggest(self.model, served)}, and refuses that name "
                              f"(HTTP {exc.code})") from None
        except (urllib.error.URLError, OSError):
            return

    def refused(self, exc: urllib.error.HTTPError) -> RewardError:
        """The error for an answer that says the request itself is wrong (REFUSALS), with the server's words."""
        try:
            said = json.loads(exc.read() or b"{}")
            said = said.get("error", said) if isinstance(said, dict) else said
            said = said.get("message") or said.get("detail") or said if isinstance(said, dict) else said
        except (ValueError, OSError):
            said = exc.reason
        return RewardError(f"reward judge: the server at {self.base_url} refuses the request (HTTP {exc.code}: "
                           f"{' '.join(str(said).split())[:200]}); check params.model and params.api_key_env")

    def body(self, prompt: Any, completion: Any) -> dict:
        # str.replace, not str.format: a rubric may hold JSON braces, a completion may hold anything
        user = self.rubric.replace("{prompt}", _prompt_text(prompt)).replace("{completion}",
                                                                           completion_text(completion))
        messages = ([{"role": "system", "content": self.system}] if self.system else []) + [
            {"role": "user", "content": user}]
        return {"model": self.model, "messages": messages, "temperature": self.temperature,
                "max_tokens": self.max_tokens}

    def _cache_file(self, body: dict) -> Path:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        return self.cache_dir / digest[:2] / f"{digest}.json"

    def answer(self, body: dict) -> str | None:
        """The judge's answer text (cached), or None when the server failed or timed out (not cached)."""
        path = self._cache_file(body)
        if path.is_file():
            try:
                return json.loads(path.read_text())["content"]
            except (json.JSONDecodeError, KeyError):
                pass  # a damaged entry is asked again
        request = urllib.request.Request(f"{self.base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers=self.headers, method="POST")
        self.requests_sent += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                content = json.loads(response.read())["choices"][0]["message"]["content"] or ""
        except urllib.error.HTTPError as exc:
            if exc.code in REFUSALS:  # every request would be refused alike: stop, rather than score all None
                raise self.refused(exc) from None
            return None
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError):
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.with_suffix(f".{os.getpid()}.tmp")
        staging.write_text(json.dumps({"content": content, "request": body}, ensure_ascii=False))
        os.replace(staging, path)
        return content

    def parse(self, content: str | None) -> float | None:
        """The last score the pattern finds in an answer, or None."""
        if content is None:
            return None
        found = self.pattern.findall(content)
        if not found:
            return None
        value = found[-1][0] if isinstance(found[-1], tuple) else found[-1]
        try:
            return float(value)
        except ValueError:
            return None

    def __call__(self, completions: list, prompts: list | None = None, **columns) -> list[float | None]:
        prompts = list(prompts) if prompts is not None else [""] * len(completions)
        bodies = [self.body(p, c) for p, c in zip(prompts, completions, strict=True)]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return [self.parse(content) for content in pool.map(self.answer, bodies)]
