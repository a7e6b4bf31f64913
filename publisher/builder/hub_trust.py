"""Whose binaries `build` may reuse from the Hub. A fetched variant is
published as this project's own, so its repository must be one the user
trusts, decided as `kernels.get_kernel` decides what it loads:

1. the user named it (`--hub-cache-trust`, publisher.toml `hub-cache-trust`),
   an owner or one repo id; like get_kernel's `trust_remote_code` allowlist;
2. the token can write to it (the user's own account, or an org where the
   user may write, with a write token or a fine-grained token that grants
   `repo.write` there): whatever is there, the user could have pushed it;
3. the Hub marks its owner a trusted kernel publisher (`trustedKernelPublisher`,
   the check get_kernel makes by default).

Anything else, and a check that cannot be made, is untrusted: the variants
are compiled."""

from __future__ import annotations

from dataclasses import dataclass

from publisher.errors import PublisherError
from publisher.push.hub_client import HubClient

_WRITE_ROLES = frozenset({"admin", "write"})  # roleInOrg that may push to the org's repos


@dataclass(frozen=True)
class Trust:
    trusted: bool
    reason: str


def decide_trust(client: HubClient, repo_id: str, allowed: tuple[str, ...]) -> Trust:
    owner = repo_id.split("/", 1)[0]
    if repo_id in allowed or owner in allowed:
        return Trust(True, f"{owner if owner in allowed else repo_id} is trusted by --hub-cache-trust/publisher.toml")
    try:
        account = client.whoami()
        if account is not None and can_write(account, repo_id):
            return Trust(True, f"your token can write to {repo_id}")
        if client.trusted_publisher(owner):
            return Trust(True, f"the Hub marks {owner} a trusted kernel publisher")
    except PublisherError as err:
        return Trust(False, f"whether {owner} is trusted could not be checked ({err.message})")
    return Trust(False, f"{owner} is not you, not an org you can write to, and not a trusted kernel publisher")


def can_write(account: dict, repo_id: str) -> bool:
    """Whether the whoami answer `account` may push to `repo_id`."""
    owner = repo_id.split("/", 1)[0]
    member = owner == account.get("name") or any(
        org.get("name") == owner and org.get("roleInOrg") in _WRITE_ROLES for org in account.get("orgs") or ())
    if not member:
        return False
    token = (account.get("auth") or {}).get("accessToken") or {}
    role = token.get("role")
    if role in _WRITE_ROLES:
        return True
    if role == "fineGrained":
        scoped = (token.get("fineGrained") or {}).get("scoped") or ()
        return any((grant.get("entity") or {}).get("name") in (owner, repo_id)
                   and "repo.write" in (grant.get("permissions") or ()) for grant in scoped)
    return False
