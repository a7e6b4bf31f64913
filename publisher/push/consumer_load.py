"""After the commit: load the published version as a consumer does, exactly as
the card tells users (publisher.consumer.LoadCall), in a fresh process with a
fresh Hugging Face cache and no token (consumer_probe.py), and check its ops.
What a consumer meets, push meets first: an owner the Hub does not trust, a
variant that does not import outside the build machine, metadata the client
refuses."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path

from publisher import runner
from publisher.codes import finding
from publisher.consumer import LoadCall
from publisher.errors import PublishedIncomplete
from publisher.findings import Finding

_PROBE = Path(__file__).with_name("consumer_probe.py")
TIMEOUT = 900  # seconds: a consumer's download of the variant included
# what the probe's process does not inherit: credentials (a consumer has none), a local override of the
# repo, offline mode, and HF_HUB_DISABLE_TELEMETRY (kernels 0.17.2 then sends an invalid User-Agent)
_DROPPED = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "HF_HUB_CACHE", "HF_XET_CACHE",
            "HF_ASSETS_CACHE", "HF_HUB_OFFLINE", "LOCAL_KERNELS", "HF_HUB_DISABLE_TELEMETRY", "KERNELS_CACHE")


@dataclass(frozen=True)
class ConsumerLoad:
    call: str  # the load call, as on the card
    status: str  # loaded, no-variant, failed, not-checked
    variant: str | None = None
    ops: int | None = None
    detail: str = ""  # the error, or why nothing was loaded here
    with_token: bool = False  # a private repo: only consumers with access load it

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        """One line for the push's output."""
        who = "with your token (the repo is private)" if self.with_token else "as a consumer (fresh cache, no token)"
        if self.status == "loaded":
            ops = f", {self.ops} op(s) registered" if self.ops else ""
            return f"{self.call} {who}: loaded {self.variant}{ops}"
        if self.status == "no-variant":
            return f"{self.call} {who}: the publisher trust check and listing passed; no variant for this machine " \
                   f"({self.detail}), so its import was not checked here"
        if self.status == "not-checked":
            return f"{self.call}: not checked here ({self.detail})"
        return f"{self.call} {who}: FAILED: {self.detail}"


class PendingLoad:
    """A consumer's process, started early so that its imports (torch, kernels) overlap the upload; it
    loads the version once told what to load (`go`, after the commit), from its own empty cache. It runs
    through publisher's runner (killed with publisher, its output redacted); what to load is handed over
    as a file in its private folder, which it reads and deletes."""

    def __init__(self, endpoint: str):
        self._home = tempfile.TemporaryDirectory(prefix="publisher-consumer-", ignore_cleanup_errors=True)
        self._request = Path(self._home.name) / "request.json"
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        env.update(HF_ENDPOINT=endpoint, HF_HOME=str(Path(self._home.name) / "hf"))
        self._done: Future = Future()
        argv = [sys.executable, str(_PROBE), str(self._request)]
        threading.Thread(target=self._run, args=(argv, env), name="publisher-consumer-load", daemon=True).start()
        self.call: LoadCall | None = None
        self.with_token = False

    def _run(self, argv: list[str], env: dict[str, str]) -> None:
        try:
            done = runner.run(argv, cwd=self._home.name, env=env, timeout=TIMEOUT)
        except BaseException as err:  # noqa: BLE001 - result() reports it
            self._home.cleanup()
            self._done.set_exception(err)
            return
        self._home.cleanup()  # before the answer: whoever waits for it may exit right after
        self._done.set_result(done)

    def _hand_over(self, request: dict) -> None:
        partial = self._request.with_suffix(".partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # may hold a private repo's token
        with os.fdopen(fd, "w") as fh:
            json.dump(request, fh)
        partial.replace(self._request)

    def go(self, call: LoadCall, variants: list[str], token: str | None = None) -> None:
        """Load `call` now; `token` only for a private repo (handed over privately, never in argv or logs)."""
        self.call, self.with_token = call, bool(token)
        self._hand_over({"repo_id": call.repo_id, "version": call.version,
                         "trust_remote_code": call.trust_remote_code, "variants": variants, "token": token})

    def result(self) -> ConsumerLoad:
        assert self.call is not None, "go() first"
        done = self._done.result()
        if done.timed_out:
            return self._load("not-checked", detail=f"the load took over {TIMEOUT} s")
        answer = _last_json(done.output)
        if answer is None:
            tail = (done.output.strip().splitlines() or ["no output"])[-1]
            return self._load("failed", detail=f"the loading process ended with code {done.returncode}: {tail}")
        return self._load(answer["status"], answer.get("variant"), answer.get("ops"),
                          answer.get("error") or answer.get("reason") or "")

    def cancel(self) -> None:
        """The push stopped before its end. Not told what to load yet: its folder goes, and it ends
        without loading. Loading already: it is let finish (its folder goes with it)."""
        if self.call is None:
            self._home.cleanup()
            return
        try:
            self._done.result(timeout=TIMEOUT)
        except BaseException:  # noqa: BLE001 - the push's own error is the one to report
            pass

    def _load(self, status: str, variant: str | None = None, ops: int | None = None, detail: str = "") -> ConsumerLoad:
        return ConsumerLoad(self.call.render(), status, variant, ops, detail, self.with_token)


def _last_json(stdout: str) -> dict | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and "status" in value:
            return value
    return None


def fix_for(load: ConsumerLoad, call: LoadCall) -> str:
    """What the author does about a failed consumer load."""
    text = load.detail
    if "trust_remote_code" in text:
        return (f"the Hub does not let consumers load {call.repo_id} without trust_remote_code: show them "
                f'`get_kernel("{call.repo_id}", version={call.version}, trust_remote_code=["{call.repo_id}"])`, '
                f"or ask the Hub to mark {call.owner} a trusted kernel publisher")
    if "requires kernels>=" in text:
        return "consumers need a newer kernels client; say so on the card, or build without the feature that needs it"
    if "registers no op" in text or "_ops" in text:
        return ("the library registers no op under the variant's id: register ops with "
                "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ...) in torch-ext/torch_binding.cpp, rebuild, test and push")
    return ("the published variant does not load outside the build machine: reproduce with the call above in a "
            "clean environment, fix the kernel, rebuild, test and push again (the push replaces the variant)")


def findings(load: ConsumerLoad, call: LoadCall) -> list[Finding]:
    """PP401 for a load that failed, PP403 for one this machine could not check."""
    if load.failed:
        return [finding("PP401", f"published, but consumers cannot load it: {load.detail}", hint=fix_for(load, call))]
    if load.status == "not-checked":
        return [finding("PP403", f"the consumer load was not checked here: {load.detail}",
                        hint="install torch and kernels where you push, to check the published version loads")]
    return []


class ConsumersCannotLoad(PublishedIncomplete):
    """The version branch holds the build, but a consumer cannot load it as the card says."""

    def __init__(self, load: ConsumerLoad, call: LoadCall):
        super().__init__(f"published, but consumers cannot load it: {load.call}: {load.detail}", fix_for(load, call))
        self.findings = tuple(findings(load, call))
