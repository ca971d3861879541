"""``evalign.backends``: a backend by name (:class:`BackendSpec`: the ``KIND:MODEL[@URL][,K=V]`` string, a dict,
its repr, none with a secret), :func:`open_backend`, the deprecated ``evalign.judges.backends`` alias and a
plugin backend written against it, found through the ``evalign.backends`` entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalign.backends import BackendSpec, OpenAICompatibleBackend, open_backend
from evalign.backends.spec import split_spec
from evalign.bench import parse_judge
from evalign.errors import UsageError

PASSWORD = "hunter2-s3cret"
SPEC = f"openai:qwen2.5-7b@http://judge:{PASSWORD}@localhost:8000/v1,concurrency=4,api_key_env=JUDGE_KEY"


def test_string_and_dict_round_trip_without_the_secret() -> None:
    spec = BackendSpec.parse(SPEC)
    assert (spec.kind, spec.model) == ("openai", "qwen2.5-7b")
    assert spec.options == {"concurrency": 4, "api_key_env": "JUDGE_KEY"}
    assert spec.url == (f"http://judge:{PASSWORD}@localhost:8000/v1",)  # kept for the backend's Authorization
    shown = [repr(spec), str(spec), json.dumps(spec.to_dict()), spec.described]
    assert not [s for s in shown if PASSWORD in s or "judge:" in s]
    assert str(spec) == "openai:qwen2.5-7b@http://localhost:8000/v1,concurrency=4,api_key_env=JUDGE_KEY"
    assert spec.to_dict() == {"kind": "openai", "model": "qwen2.5-7b", "url": ["http://localhost:8000/v1"],
                              "options": {"concurrency": 4, "api_key_env": "JUDGE_KEY"}}
    back = BackendSpec.from_dict(spec.to_dict())
    assert back == BackendSpec.parse(str(spec)) and back.url == ("http://localhost:8000/v1",)


def test_several_urls_values_and_the_other_options() -> None:
    spec, other = split_spec("multi:m@http://a:1/v1@http://b:2/v1,timeout=2.5,stream=false,temperature=0,reask=true,"
                             "api_key_env=none")
    assert spec.url == ("http://a:1/v1", "http://b:2/v1")
    assert spec.options == {"timeout": 2.5, "api_key_env": None}
    assert other == {"stream": False, "temperature": 0, "reask": True}  # not backend options: the caller's
    assert str(spec) == "multi:m@http://a:1/v1@http://b:2/v1,timeout=2.5,api_key_env=none"
    assert BackendSpec.parse(str(spec)) == spec
    assert BackendSpec.from_dict({"kind": "llama", "model": "smollm2-135m-instruct"}).url == ()


@pytest.mark.parametrize(("text", "message"), [
    ("openai:m,api_key=sk-live-123", "a spec holds no secret"),
    ("openai:m,token=abc", "a spec holds no secret"),
    ("openai:m,api_key_env=sk-live-123", "must be the NAME of an environment variable"),
    ("nope:m", "unknown judge backend 'nope'"),
    ("openai", "the spec starts with a backend"),
    ("openai:m,concurrency", "option 'concurrency' is not KEY=VALUE"),
    ("openai:m,temperature=0", "unknown backend option 'temperature'"),
])
def test_bad_specs(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as err:
        BackendSpec.parse(text)
    assert "sk-live-123" not in str(err.value) and "=abc" not in str(err.value)  # a secret is never echoed


def test_open_backend_builds_the_registered_backend() -> None:
    spec = BackendSpec.parse(f"openai:m@http://judge:{PASSWORD}@127.0.0.1:9/v1,concurrency=3,api_key_env=none")
    with open_backend(spec) as backend:
        assert isinstance(backend, OpenAICompatibleBackend)
        assert backend.concurrency == 3
        assert backend.identity()["base_url"] == "http://127.0.0.1:9/v1"
        assert PASSWORD not in repr(backend)
    with pytest.raises(UsageError, match="judge x: n_ctx apply to the llama backend only"), \
            open_backend(BackendSpec.parse("openai:m@http://127.0.0.1:9/v1,n_ctx=4096"), name="judge x"):
        pass


def test_bench_judge_spec_names_its_backend_spec() -> None:
    judge = parse_judge(f"big=openai:m@http://u:{PASSWORD}@h:1/v1,temperature=0.5,concurrency=2")
    assert judge.backend_spec == BackendSpec(kind="openai", model="m", url=(f"http://u:{PASSWORD}@h:1/v1",),
                                             options={"concurrency": 2})
    assert judge.options == {"temperature": 0.5}
    assert judge.described == "openai:m@http://h:1/v1"


PLUGIN = '''
from evalign.judges.backends import Backend, Generation, Usage


class EchoBackend(Backend):
    kind = "echo"

    def __init__(self, model, concurrency=1):
        super().__init__()
        self.model, self.concurrency = model, concurrency

    def identity(self):
        return {"kind": "echo", "model": self.model}

    async def generate(self, req):
        return Generation(text=req.messages[-1]["content"][::-1], finish_reason="stop", top_logprobs=None,
                          usage=Usage())
'''

PROBE = '''
import sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import evalign.judges.backends as old
    import evalign.judges.backends.openai as old_openai
import evalign.backends as new
import evalign.backends.openai as new_openai
from evalign.backends import BackendSpec, GenerationRequest, open_backend
print([str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)])
print(old.BACKENDS is new.BACKENDS, old_openai is new_openai, new_openai.__spec__.name)
with open_backend(BackendSpec.parse("echo:tiny,concurrency=2")) as backend:
    gen = backend.run([GenerationRequest(messages=[{"role": "user", "content": "abc"}])])[0]
    print(type(backend).__name__, backend.concurrency, gen.text)
'''


def test_deprecated_alias_and_a_plugin_backend_through_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "echo_backend").mkdir(parents=True)
    (site / "echo_backend" / "__init__.py").write_text(PLUGIN)
    dist = site / "echo_backend-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-backend\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(textwrap.dedent("""
        [evalign.backends]
        echo = echo_backend:EchoBackend
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    warned, same, opened = res.stdout.strip().splitlines()
    assert warned == ("['evalign.judges.backends is deprecated and will be removed in the next release: "
                      "import evalign.backends']")
    assert same == "True True evalign.backends.openai"
    assert opened == "EchoBackend 2 cba"
