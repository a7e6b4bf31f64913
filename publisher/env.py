"""Environment settings about the Hub, read and checked in one place. A value
that cannot work is a usage error naming the variable and the fix: never a
traceback, and never retried as if the Hub were having a bad day."""

from __future__ import annotations

import math
import os
from urllib.parse import urlsplit

from publisher.errors import UsageError

DEFAULT_ENDPOINT = "https://huggingface.co"
GITHUB = "https://github.com"
_TRUE = ("1", "ON", "YES", "TRUE")  # huggingface_hub's spelling of "set"


def _show(value: str) -> str:
    """A value for a message: escaped, and cut when very long."""
    shown = value.encode("unicode_escape", "backslashreplace").decode("ascii")
    return repr(shown if len(shown) <= 60 else shown[:50] + "...")


def endpoint_problem(url: str) -> str | None:
    """Why `url` cannot be a Hub endpoint, or None."""
    if not url.strip():
        return "is empty"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of range or not a number
    except ValueError as err:
        return f"is not a URL ({err})"
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    if not parts.hostname:
        return "has no host name"
    if any(c.isspace() or not c.isprintable() for c in url):
        return "contains spaces or control characters"
    return None


def hub_endpoint(explicit: str | None) -> str:
    """The Hub URL: `explicit` (--endpoint), else HF_ENDPOINT, else the Hub."""
    if explicit is not None and explicit != os.environ.get("HF_ENDPOINT"):
        value, source = explicit, "--endpoint"
    elif "HF_ENDPOINT" in os.environ:
        value, source = os.environ["HF_ENDPOINT"], "HF_ENDPOINT"
    else:
        return DEFAULT_ENDPOINT
    problem = endpoint_problem(value)
    if problem:
        raise UsageError(f"{source}={_show(value)} {problem}",
                         f"set {source} to the Hub's URL, e.g. {DEFAULT_ENDPOINT} or http://127.0.0.1:8080 "
                         f"for a local hub-server" + ("; or unset it to use the Hub" if source == "HF_ENDPOINT" else ""))
    return value.rstrip("/")


def token_problem(token: str) -> str | None:
    """Why `token` cannot be sent as a Hub token, or None. Never shows the value."""
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        return "contains characters a Hub token never has (spaces, control or non-ASCII characters)"
    return None


def hub_token(explicit: str | None) -> str | None:
    """The token to send: `explicit`, else HF_TOKEN, else huggingface_hub's login
    (its token file, HF_TOKEN_PATH). A value that cannot be a header is a usage
    error naming where it came from, never the value itself."""
    if explicit:
        token, source = explicit, "the token given"
    elif os.environ.get("HF_TOKEN"):
        token, source = os.environ["HF_TOKEN"], "HF_TOKEN"
    else:
        from huggingface_hub.utils import get_token

        token, source = get_token(), "the saved Hub login (hf auth login)"
    problem = token_problem(token) if token else None
    if problem:
        raise UsageError(f"{source} {problem}",
                         "set HF_TOKEN to a token from <endpoint>/settings/tokens, or unset it to use `hf auth login`")
    return token or None


def hub_offline() -> bool:
    """HF_HUB_OFFLINE, read as huggingface_hub reads it (TRANSFORMERS_OFFLINE when it is unset)."""
    return (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or "").upper() in _TRUE


def _number(name: str, default: float, low: float, high: float, whole: bool) -> float:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or not low <= number <= high:
        kind = "a whole number" if whole else "a number of seconds"
        raise UsageError(f"{name}={_show(value)} must be {kind} from {low:g} to {high:g}",
                         f"set e.g. {name}={default:g}, or unset it for the default ({default:g})")
    return number


def hub_attempts(default: int) -> int:
    """PUBLISHER_HUB_RETRIES: how many times a Hub call is tried (1: no retry)."""
    return int(_number("PUBLISHER_HUB_RETRIES", default, 1, 100, whole=True))


def hub_backoff(default: float) -> float:
    """PUBLISHER_HUB_BACKOFF: seconds before the first retry (doubling after)."""
    return _number("PUBLISHER_HUB_BACKOFF", default, 0, 600, whole=False)


def hub_xet_disabled() -> bool:
    return os.environ.get("HF_HUB_DISABLE_XET", "").upper() in _TRUE


def hub_telemetry_disabled() -> bool:
    return os.environ.get("HF_HUB_DISABLE_TELEMETRY", "").upper() in _TRUE


# Settings of publisher's own, by the variable that sets them. The variables
# publisher sets for its test children are in publisher/testing/protocol.py.

def cache_dir() -> str | None:
    """PUBLISHER_CACHE_DIR: where toolchains are kept (default: XDG_CACHE_HOME/publisher)."""
    return os.environ.get("PUBLISHER_CACHE_DIR") or None


def docker_base_image() -> str | None:
    """PUBLISHER_DOCKER_BASE_IMAGE: what the docker backend's builder image is made from."""
    return os.environ.get("PUBLISHER_DOCKER_BASE_IMAGE") or None


def docker_cache_volume() -> str:
    """PUBLISHER_DOCKER_CACHE_VOLUME: the Docker volume holding toolchains and pip caches."""
    return os.environ.get("PUBLISHER_DOCKER_CACHE_VOLUME", "publisher-cache")


def github_mirror() -> str:
    """PUBLISHER_GITHUB_MIRROR: a URL serving github.com's paths (`<repo>/archive/refs/tags/<tag>.tar.gz`)
    for the sources a build fetches from GitHub; every archive is still checked against its pinned hash."""
    value = os.environ.get("PUBLISHER_GITHUB_MIRROR")
    if value is None or value == "":
        return GITHUB
    problem = endpoint_problem(value)
    if problem:
        raise UsageError(f"PUBLISHER_GITHUB_MIRROR={_show(value)} {problem}",
                         "set it to a mirror's URL (e.g. https://github-mirror.example.com), or unset it to use github.com")
    return value.rstrip("/")


def nix_kernel_builder() -> str | None:
    """PUBLISHER_NIX_KERNEL_BUILDER: flake URL that replaces the `kernel-builder` input."""
    return os.environ.get("PUBLISHER_NIX_KERNEL_BUILDER") or None


def hub_server_log() -> bool:
    """PUBLISHER_HUB_LOG: hub-server logs every request."""
    return bool(os.environ.get("PUBLISHER_HUB_LOG"))


def job_staging() -> tuple[str, str]:
    """PUBLISHER_STAGING (set by the caller for a remote build job): `<repo>:<path>` of the private staging
    place the job sends the variants it built to; ("", "") when unset."""
    repo, _, path = os.environ.get("PUBLISHER_STAGING", "").partition(":")
    return repo, path
