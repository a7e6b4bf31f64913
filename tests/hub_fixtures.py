"""pytest fixtures for the Hub-compatible server (imported by conftest.py).

`hub`      one server for the session on a free 127.0.0.1 port (thread), with a
           write token and a read-only token (random, shaped like real ones so
           `publisher.secrets.redact` recognises them). It marks one org, TRUSTED_ORG,
           a trusted kernel publisher, as the Hub marks few: tests that load with the
           bare `get_kernel(repo, version=N)` (and the Hub cache, which fetches only from
           trusted publishers) publish under it; any other org, and the user account
           USER, loads only with trust_remote_code.
`hub_env`  points this process (and the subprocesses it starts) at that server:
           HF_ENDPOINT, HF_HUB_DISABLE_XET=1, HF_TOKEN, a private HF_HOME; removes
           HF_HUB_DISABLE_TELEMETRY (kernels 0.17.2 then sends an invalid
           User-Agent). Clears injected faults and counters around each test.
`jobs_hub` one server for the session whose jobs run with the process executor,
           with a write token (job.write), a token without job.write, a read-only
           token, an org the user belongs to, and two jobs a page (so every
           listing goes through the client's pagination).
"""

from __future__ import annotations

import os
import secrets
import string
from dataclasses import dataclass
from pathlib import Path

import pytest

from publisher.hub_server.server import HubServer, ServerConfig

__all__ = ["hub", "hub_env", "Hub", "jobs_hub", "JobsHub", "TRUSTED_ORG", "USER"]

TRUSTED_ORG = "publisher-test"  # the org the test run's server marks a trusted kernel publisher
USER = ServerConfig().user  # the token's user account: no org overview, as on the Hub


def _fake_token() -> str:
    alphabet = string.ascii_letters + string.digits
    return "hf_" + "".join(secrets.choice(alphabet) for _ in range(34))


@dataclass
class Hub:
    server: HubServer
    data_dir: Path
    write_token: str
    read_token: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def state(self):
        return self.server.state

    def fault(self, endpoint: str, action: str = "status", status: int = 500, times: int = 1, after: int = 0,
              seconds: float = 0.0):
        return self.state.faults.add(endpoint, action, status, times, after, seconds)

    def env(self, token: str | None = None) -> dict[str, str]:
        """Environment for a client subprocess talking to this server."""
        env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_TELEMETRY"}
        env.update(HF_ENDPOINT=self.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=token or self.write_token)
        return env


@pytest.fixture(scope="session")
def hub(tmp_path_factory) -> Hub:
    data_dir = tmp_path_factory.mktemp("hub-data")
    write, read = _fake_token(), _fake_token()
    server = HubServer(data_dir, ServerConfig(tokens={write: "write", read: "read"},
                                              trusted_orgs=frozenset({TRUSTED_ORG}))).start()
    yield Hub(server, data_dir, write, read)
    server.close()


@pytest.fixture
def hub_env(hub: Hub, monkeypatch, tmp_path) -> Hub:
    import huggingface_hub.constants as hf_constants

    monkeypatch.delenv("HF_HUB_DISABLE_TELEMETRY", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_TOKEN", hub.write_token)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    # huggingface_hub reads these once, at import; this process may have imported it already.
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(hf_constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(hf_constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
    hub.state.faults.clear()
    hub.state.reset_stats()
    yield hub
    hub.state.faults.clear()


@dataclass
class JobsHub:
    server: HubServer
    data_dir: Path
    write_token: str
    no_jobs_token: str
    read_token: str
    user: str = "publisher-dev"
    org: str = "jobs-org"

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, token: str | None = None):
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.url, token=token or self.write_token)


@pytest.fixture(scope="session")
def jobs_hub(tmp_path_factory) -> JobsHub:
    data_dir = tmp_path_factory.mktemp("jobs-hub")
    write, no_jobs, read = _fake_token(), _fake_token(), _fake_token()
    config = ServerConfig(tokens={write: "write", no_jobs: "write-no-jobs", read: "read"}, orgs={"jobs-org": "write"},
                          jobs_executor="process", jobs_page_size=2)
    server = HubServer(data_dir, config).start()
    yield JobsHub(server, data_dir, write, no_jobs, read)
    server.close()
