"""The job a client asks for: the body of `POST /api/jobs/{namespace}` (what
huggingface_hub's `_create_job_spec` sends), checked as the Hub's published
schema checks it, into a frozen `JobSpec`. Secret values are split off here:
a `JobSpec` holds their names only, so nothing built from it (the JobInfo
answer, the job's file on disk) can carry a value."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from publisher.errors import HubError
from publisher.hub_server.jobs.hardware import flavors

# The Hub's create-job schema (its OpenAPI document): environment names need two
# characters or more, secret names one or more; labels keys and values are short words.
_ENV_NAME = re.compile(r"[a-zA-Z][_a-zA-Z0-9]+")
_SECRET_NAME = re.compile(r"[a-zA-Z][_a-zA-Z0-9]*")
_LABEL_KEY = re.compile(r"[a-zA-Z0-9._-]{1,100}")
_LABEL_VALUE = re.compile(r"[a-zA-Z0-9._-]{0,100}")
# The schema's volume types. huggingface_hub's `hf://kernels/...` URIs would make a
# "kernel" volume, which the Hub's schema refuses; so does this server.
VOLUME_TYPES = ("bucket", "model", "dataset", "space")
REPO_VOLUME_TYPES = ("model", "dataset", "space")
ARCHES = ("amd64", "arm64")
# Features of the Hub's jobs that need its infrastructure (a public proxy, an SSH
# gateway, a cluster network); refused rather than accepted and silently ignored.
_UNSUPPORTED = {"expose": "exposed ports (the Hub's jobs proxy)", "ssh": "SSH access (the Hub's SSH gateway)",
                "network": "network groups"}


@dataclass(frozen=True)
class VolumeSpec:
    type: str
    source: str
    mount_path: str
    revision: str | None = None
    read_only: bool | None = None
    path: str | None = None

    def to_api(self) -> dict:
        out: dict = {"type": self.type, "source": self.source, "mountPath": self.mount_path}
        if self.revision is not None:
            out["revision"] = self.revision
        out["readOnly"] = self.mounted_read_only
        if self.path is not None:
            out["path"] = self.path
        return out

    @property
    def mounted_read_only(self) -> bool:
        """Repos are always mounted read-only; buckets read-write unless asked."""
        return True if self.type in REPO_VOLUME_TYPES else bool(self.read_only)

    def describe(self) -> str:
        where = f"{self.type} {self.source}" + (f"@{self.revision}" if self.revision else "")
        return where + (f" (path {self.path})" if self.path else "") + f" at {self.mount_path}"


@dataclass(frozen=True)
class JobSpec:
    flavor: str
    docker_image: str | None = None
    space_id: str | None = None
    command: tuple[str, ...] = ()
    arguments: tuple[str, ...] = ()
    environment: Mapping[str, str] = field(default_factory=dict)
    secret_names: tuple[str, ...] = ()
    timeout_seconds: int | None = None
    attempts: int = 1
    labels: Mapping[str, str] = field(default_factory=dict)
    volumes: tuple[VolumeSpec, ...] = ()
    arch: str | None = None
    resource_group_id: str | None = None

    def with_labels(self, labels: Mapping[str, str]) -> JobSpec:
        return replace(self, labels=dict(labels))

    def to_body(self) -> dict:
        """The spec as a create-job body (secret names under "secretNames", no values): `parse_spec` reads it back."""
        body: dict = {"flavor": self.flavor, "arguments": list(self.arguments),
                      "environment": dict(self.environment), "secretNames": list(self.secret_names),
                      "attempts": self.attempts, "labels": dict(self.labels)}
        optional = {"dockerImage": self.docker_image, "spaceId": self.space_id, "timeoutSeconds": self.timeout_seconds,
                    "arch": self.arch, "resourceGroupId": self.resource_group_id}
        body.update({k: v for k, v in optional.items() if v is not None})
        if self.command:
            body["command"] = list(self.command)
        if self.volumes:
            body["volumes"] = [v.to_api() for v in self.volumes]
        return body


def _bad(message: str) -> HubError:
    return HubError(400, message)


def _strings(value: object, name: str, *, min_items: int = 0) -> tuple[str, ...]:
    if value is None:
        value = []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{name}: expected a list of strings")
    if len(value) < min_items:
        raise _bad(f"{name}: expected at least {min_items} item(s)")
    return tuple(value)


def _mapping(value: object, name: str, key: re.Pattern, *, show_values: bool = True) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _bad(f"{name}: expected an object of strings")
    for k, v in value.items():
        if not key.fullmatch(k):
            raise _bad(f"{name}: invalid name {k!r} (must match ^{key.pattern}$)")
        if not isinstance(v, str):
            # a secret's value is never echoed, not even a wrong one
            raise _bad(f"{name}.{k}: expected a string" + (f", got {v!r}" if show_values else ""))
    return dict(value)


def labels_from(value: object) -> dict[str, str]:
    labels = _mapping(value, "labels", _LABEL_KEY)
    for k, v in labels.items():
        if not _LABEL_VALUE.fullmatch(v):
            raise _bad(f"labels.{k}: invalid value {v!r} (at most 100 letters, digits, '.', '-' or '_')")
    return labels


def _volume(item: object, index: int) -> VolumeSpec:
    where = f"volumes[{index}]"
    if not isinstance(item, dict):
        raise _bad(f"{where}: expected an object")
    kind = item.get("type")
    if kind not in VOLUME_TYPES:
        raise _bad(f"{where}.type: invalid volume type {kind!r}; expected one of {', '.join(VOLUME_TYPES)}")
    source, mount = item.get("source"), item.get("mountPath")
    if not isinstance(source, str) or not source:
        raise _bad(f"{where}.source: required, e.g. 'username/my-model'")
    if not isinstance(mount, str) or not mount.startswith("/"):
        raise _bad(f"{where}.mountPath: must be an absolute path inside the container, e.g. '/data'")
    revision, read_only, path = item.get("revision"), item.get("readOnly"), item.get("path")
    if revision is not None and not isinstance(revision, str):
        raise _bad(f"{where}.revision: expected a string")
    if read_only is not None and not isinstance(read_only, bool):
        raise _bad(f"{where}.readOnly: expected true or false")
    if path is not None and not isinstance(path, str):
        raise _bad(f"{where}.path: expected a string")
    return VolumeSpec(kind, source, mount, revision, read_only, path)


def split_secrets(body: Mapping) -> tuple[dict, dict[str, str]]:
    """(the body without secret values, the secrets): checked first, so no later
    error message can quote a value."""
    secrets = _mapping(body.get("secrets"), "secrets", _SECRET_NAME, show_values=False)
    rest = {k: v for k, v in body.items() if k != "secrets"}
    rest["secretNames"] = sorted(secrets)
    return rest, secrets


def parse_spec(body: Mapping) -> JobSpec:
    """The spec of `body` (secrets already split off by `split_secrets`), or a 400
    naming the field, as the Hub's schema validation refuses it."""
    for key, what in _UNSUPPORTED.items():
        if body.get(key):
            raise _bad(f"{key}: {what} is not supported by this Hub-compatible server")
    known = flavors()
    flavor = body.get("flavor")
    if not isinstance(flavor, str) or flavor not in known:
        raise _bad(f"flavor: invalid flavor {flavor!r}; expected one of {', '.join(known)}")
    image, space = body.get("dockerImage"), body.get("spaceId")
    if not image and not space:
        raise _bad("dockerImage or spaceId: one of them is required (the image the job runs in)")
    if image is not None and not isinstance(image, str) or space is not None and not isinstance(space, str):
        raise _bad("dockerImage, spaceId: expected a string")
    command = _strings(body.get("command"), "command", min_items=1 if "command" in body else 0)
    if any(not part for part in command):
        raise _bad("command: an item is empty")
    timeout = body.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0):
        raise _bad("timeoutSeconds: expected a whole number of seconds above 0")
    attempts = body.get("attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise _bad("attempts: expected a whole number, 1 or more")
    arch = body.get("arch")
    if arch is not None and arch not in ARCHES:
        raise _bad(f"arch: invalid value {arch!r}; expected one of {', '.join(ARCHES)}")
    volumes = body.get("volumes")
    if volumes is not None and (not isinstance(volumes, list) or not volumes):
        raise _bad("volumes: expected a list of one volume or more")
    group = body.get("resourceGroupId")
    if group is not None and not (isinstance(group, str) and re.fullmatch(r"[0-9a-fA-F]{24}", group)):
        raise _bad("resourceGroupId: expected a 24-character hexadecimal id")
    return JobSpec(
        flavor=flavor, docker_image=image or None, space_id=space or None, command=command,
        arguments=_strings(body.get("arguments"), "arguments"),
        environment=_mapping(body.get("environment"), "environment", _ENV_NAME),
        secret_names=tuple(body.get("secretNames", ())), timeout_seconds=timeout, attempts=attempts,
        labels=labels_from(body.get("labels")),
        volumes=tuple(_volume(item, i) for i, item in enumerate(volumes or [])), arch=arch,
        resource_group_id=group)
