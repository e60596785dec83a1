"""The unit tier loads no model: while a test under tests/unit sets up, runs or tears down, building a transformers
model (`from_pretrained`, `from_config`, a model class), loading a state dict into any module, or reading a weights
file (`torch.load`, safetensors) fails the test, even if the code under test catches the exception. A test that needs
one of these belongs in tests/integration. Building a model on the meta device (accelerate's `init_empty_weights`:
shapes only, no memory, no weights) is allowed: that is how a plan sizes a model.

How: on first use, each of those is replaced, where it is defined and under every name a loaded module already bound
it to (`from safetensors.torch import load_file`), by a wrapper that refuses while a unit test is running and passes
through otherwise; modules imported later bind the wrapper. A test that starts a Python subprocess is outside its
reach."""

import contextlib
import functools
import sys
from pathlib import Path

import pytest


class ModelLoadInUnitTest(BaseException):
    """A BaseException, so that `except Exception` in the code under test cannot swallow it."""


_ACTIVE: list[list[str] | None] = []
"""Innermost last: the attempts list of a refusing block, or None where a block lifted the refusal."""


def _refusing(original, what: str, allowed=lambda: False):
    @functools.wraps(original)
    def refuse(*args, **kwargs):
        if _ACTIVE and _ACTIVE[-1] is not None and not allowed():
            _ACTIVE[-1].append(what)
            raise ModelLoadInUnitTest(f"this unit test {what}; tests that load a model belong in tests/integration")
        return original(*args, **kwargs)

    return refuse


@functools.cache
def _install() -> None:
    import safetensors
    import safetensors.torch
    import torch
    from transformers import modeling_utils

    # Methods: replaced on their class, which every subclass and instance looks them up on.
    model_init = "built a transformers model (from_pretrained, from_config or a model class)"
    register_parameter = torch.nn.Module.register_parameter

    def on_meta_device() -> bool:
        # init_empty_weights swaps register_parameter for one that puts every parameter on the meta device
        return torch.get_default_device().type == "meta" or torch.nn.Module.register_parameter is not register_parameter

    modeling_utils.PreTrainedModel.__init__ = _refusing(modeling_utils.PreTrainedModel.__init__, model_init,
                                                        on_meta_device)
    torch.nn.Module.load_state_dict = _refusing(torch.nn.Module.load_state_dict, "loaded a state dict into a module")
    # Functions: replaced under every name a loaded module bound them to.
    functions = {id(f): (f, _refusing(f, what)) for f, what in [
        (torch.load, "read a weights file with torch.load"),
        (safetensors.torch.load_file, "read a safetensors file"),
        (safetensors.torch.load, "read safetensors bytes"),
        (safetensors.safe_open, "opened a safetensors file"),
    ]}
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            found = functions.get(id(value))
            if found is not None and found[0] is value:
                namespace[name] = found[1]


@contextlib.contextmanager
def refusing_model_loads():
    """Within the block, building a model or reading weights raises ModelLoadInUnitTest; yields what was tried."""
    _install()
    attempts: list[str] = []
    _ACTIVE.append(attempts)
    try:
        yield attempts
    finally:
        _ACTIVE.pop()


@contextlib.contextmanager
def _lifted():
    """Only for the session fixture that writes the tiny model directory unit tests use as a source path."""
    _ACTIVE.append(None)
    try:
        yield
    finally:
        _ACTIVE.pop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    yield from _guarded(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    yield from _guarded(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield from _guarded(item)


def _guarded(item):
    with refusing_model_loads() as attempts:
        try:
            result = yield
        except ModelLoadInUnitTest as exc:
            pytest.fail(str(exc), pytrace=False)
    if attempts:
        pytest.fail(f"this unit test {attempts[0]} (and caught the refusal); tests that load a model belong in "
                    "tests/integration", pytrace=False)
    return result


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """The root conftest's tiny model directory, written once with the guard lifted: unit tests use it as a model
    source path and for its tokenizer; loading the model from it is refused like any other."""
    from tiny_models import build_tiny_dir

    with _lifted():
        return build_tiny_dir(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def model_load_guard():
    """The guard itself, for the test that proves it catches every way in: (context manager, its exception)."""
    return refusing_model_loads, ModelLoadInUnitTest
