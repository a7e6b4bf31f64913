"""What a build container needs from the host to download anything: the CA
bundle and the package-index settings (corporate networks often reach PyPI
only through a proxy with its own CA, or through a mirror). Read from the
host's pip configuration and environment; options given on the command line
win. Local index locations are mounted read-only at the same path; ones that
do not exist on the host are dropped (with a note)."""

from __future__ import annotations

import configparser
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

CA_IN_CONTAINER = "/etc/publisher/ca-bundle.crt"
_SYSTEM_CA = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


@dataclass(frozen=True)
class IndexSettings:
    ca_bundle: Path | None
    index_url: str | None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what was left out, and why

    def environment(self) -> dict[str, str]:
        """Variables for pip, uv and other clients inside the container."""
        env: dict[str, str] = {}
        if self.ca_bundle:
            for var in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"):
                env[var] = CA_IN_CONTAINER
        if self.index_url:
            env["PIP_INDEX_URL"] = env["UV_INDEX_URL"] = self.index_url
        if self.extra_index_urls:
            env["PIP_EXTRA_INDEX_URL"] = env["UV_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
        if self.find_links:
            env["PIP_FIND_LINKS"] = " ".join(self.find_links)
        return env

    def mounts(self) -> dict[str, dict[str, str]]:
        """Bind mounts (docker SDK `volumes` form): the CA bundle and every local index location."""
        mounts: dict[str, dict[str, str]] = {}
        if self.ca_bundle:
            mounts[str(self.ca_bundle)] = {"bind": CA_IN_CONTAINER, "mode": "ro"}
        indexes = (self.index_url, *self.extra_index_urls) if self.index_url else self.extra_index_urls
        for location, is_index in [(u, True) for u in indexes] + [(u, False) for u in self.find_links]:
            path = _local_path(location)
            if path is None:
                continue
            if is_index and path.name == "simple":  # its pages link to files beside it
                path = path.parent
            mounts[str(path)] = {"bind": str(path), "mode": "ro"}
        return mounts

    def build_args(self) -> dict[str, str]:
        """Index settings for building the image (local locations are not in its context)."""
        args: dict[str, str] = {}
        if self.index_url and _local_path(self.index_url) is None:
            args["PIP_INDEX_URL"] = self.index_url
        remote = [u for u in self.extra_index_urls if _local_path(u) is None]
        if remote:
            args["PIP_EXTRA_INDEX_URL"] = " ".join(remote)
        return args


def host_index_settings(
    ca_bundle: Path | None = None,
    index_url: str | None = None,
    extra_index_urls: tuple[str, ...] = (),
    find_links: tuple[str, ...] = (),
) -> IndexSettings:
    pip = _pip_config()
    env = os.environ
    ca = ca_bundle or _first_file(
        env.get("PIP_CERT"), pip.get("cert"), env.get("SSL_CERT_FILE"), env.get("REQUESTS_CA_BUNDLE"), *_SYSTEM_CA
    )
    index = index_url or env.get("PIP_INDEX_URL") or pip.get("index-url")
    extras = extra_index_urls or tuple((env.get("PIP_EXTRA_INDEX_URL") or pip.get("extra-index-url") or "").split())
    links = find_links or tuple((env.get("PIP_FIND_LINKS") or pip.get("find-links") or "").split())
    notes: list[str] = []

    def usable(location: str) -> bool:
        if _is_local(location) and _local_path(location) is None:
            notes.append(f"left out {location}: it does not exist on this machine")
            return False
        return True

    if index and not usable(index):
        index = None
    return IndexSettings(
        ca_bundle=Path(ca).resolve() if ca else None,
        index_url=index,
        extra_index_urls=tuple(u for u in extras if usable(u)),
        find_links=tuple(_absolute(u) for u in links if usable(u)),
        notes=tuple(notes),
    )


def _pip_config() -> dict[str, str]:
    """pip's settings from its config files ([global], then [install] wins), in pip's order."""
    files = [
        Path("/etc/pip.conf"),
        Path("/etc/xdg/pip/pip.conf"),
        Path.home() / ".pip" / "pip.conf",
        Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "pip" / "pip.conf",
        Path(sys.prefix) / "pip.conf",
    ]
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    parser = configparser.ConfigParser(interpolation=None)
    parser.read([str(f) for f in files if f.is_file()])
    settings: dict[str, str] = {}
    for section in ("global", "install"):
        if parser.has_section(section):
            settings.update({k: " ".join(v.split()) for k, v in parser.items(section)})
    return settings


def _first_file(*candidates: str | None) -> str | None:
    return next((c for c in candidates if c and Path(c).is_file()), None)


def _is_local(location: str) -> bool:
    scheme = urlparse(location).scheme
    return scheme in ("", "file")


def _local_path(location: str) -> Path | None:
    """The host path of a local index location that exists, else None."""
    if not _is_local(location):
        return None
    path = Path(urlparse(location).path if location.startswith("file:") else location).resolve()
    return path if path.exists() else None


def _absolute(location: str) -> str:
    """Relative local paths mean nothing in the container: make them absolute."""
    if _is_local(location) and not location.startswith("file:"):
        return str(Path(location).resolve())
    return location
