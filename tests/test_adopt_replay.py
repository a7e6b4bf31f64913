"""The replay tests `publisher adopt --record` writes, run by pytest against
a stand-in package in place of a built kernel (quick: nothing compiles): a
call that gives what the original gave passes, recording what it checked; a
float beyond the original's tolerance, an index off by one or an argument not
written as the original wrote it fails, naming the call; a call the port's
schema does not take is skipped as "needs inputs" (the registration, not the
computation); a nondeterministic op is held only to its own spread."""

from __future__ import annotations

import re
import subprocess
import sys

import torch

from publisher.adopt import replay_tests
from publisher.adopt.call_recorder import encode

# what the kernel computes in place of each op (the original: x * 2, argmax, out.copy_(x), x + noise)
KERNEL = '''\
import torch


def scale(x):
    return x * 2


def shifted(x):
    return x * 2 + 1e-3


def argmax(x):
    return x.argmax(1) + 1


def write_into(out, x):
    out.copy_(x * 0)


def typed(x):
    raise RuntimeError("fake::typed() Expected a value of type 'int' for argument 'n' but instead found type "
                       "'float'.")


def noisy(x):
    return x + 0.3


def steady(x):
    return x + 0.3
'''


def _call(op: str, args: list, result, mutated: dict | None = None, spread: list | None = None) -> dict:
    return {"op": op, "from": "demo.py", "where": f"demo.py:{len(op)}", "args": encode(args), "kwargs": {},
            "result": encode(result), "mutated": {k: encode(v) for k, v in (mutated or {}).items()},
            "spread": spread if spread is not None else [0.0]}


def test_replayed_calls_pass_fail_and_skip_as_what_the_kernel_gives_says(tmp_path):
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    calls = [_call("scale", [x], x * 2), _call("shifted", [x], x * 2), _call("argmax", [x], x.argmax(1)),
             _call("write_into", [torch.zeros(3, 5), x], None, mutated={"0": x}, spread=[0.0]),
             _call("typed", [x], x), _call("noisy", [x], x, spread=[0.25]),
             _call("steady", [x], x, spread=[0.0])]
    (tmp_path / "fake_kernel").mkdir()
    (tmp_path / "fake_kernel/__init__.py").write_text(KERNEL)
    tests = tmp_path / "tests"
    (tests / "recorded").mkdir(parents=True)
    (tests / "recorded/fake.json").write_text(replay_tests.recorded_file(label="fake._C", torch_device="cpu",
                                                                         calls=calls))
    (tests / "test_fake_original.py").write_text(replay_tests.test_file(
        repo_id="org/fake", version=1, devices=["cpu"], paths={c["op"]: "" for c in calls}, label="fake._C",
        recorded="fake.json", sources=["demo.py"], ci_subset=False, package="fake_kernel"))
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-rA", "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    outcome = dict(re.findall(r"\[(\w+)-\d+\] (PASSED|FAILED|SKIPPED)", done.stdout))
    assert outcome == {"scale": "PASSED", "shifted": "FAILED", "argmax": "FAILED", "write_into": "FAILED",
                       "typed": "SKIPPED", "noisy": "PASSED", "steady": "FAILED"}, done.stdout
    out = done.stdout
    assert "shifted on the call recorded from demo.py (demo.py:7): output 0: Tensor-likes are not close!" in out
    assert "argmax on the call recorded from demo.py (demo.py:6): output 0: 3 of 3 values differ" in out
    assert "write_into on the call recorded from demo.py (demo.py:10): tensor argument 0 as the call left it" in out
    assert ("needs inputs: the kernel's schema of typed does not take the call recorded from demo.py (demo.py:5) "
            "as the original did") in out
