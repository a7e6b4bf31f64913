"""metadata.json.sigstore: the sigstore bundle a release workflow writes beside a
variant's metadata.json (kernels-community practice; `kernels verify-signature`
checks it). Push checks what can be checked offline: the bundle parses as
`kernels.verify` parses it, it signs exactly this metadata.json, and the
signature verifies under the bundle's certificate key. The certificate chain to
Fulcio, the Rekor inclusion proof and the signer policy need sigstore's public
services; `kernels verify-signature` checks those after the release."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from publisher.builder.metadata import METADATA, SIGNATURE

GITHUB_ISSUER = "https://token.actions.githubusercontent.com"
# GITHUB_WORKFLOW_REF: OWNER/REPO/.github/workflows/FILE@REF
_WORKFLOW_REF = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+)/\.github/workflows/[\w.-]+\.ya?ml@refs/\S+")


@dataclass(frozen=True)
class SignerWorkflow:
    """The GitHub workflow that signs releases: what a consumer's policy names."""

    repo: str  # OWNER/REPO
    uri: str  # https://github.com/OWNER/REPO/.github/workflows/FILE@REF

    @classmethod
    def parse(cls, ref: str) -> SignerWorkflow:
        """From GITHUB_WORKFLOW_REF's form; ValueError when it is not one."""
        found = _WORKFLOW_REF.fullmatch(ref.strip().removeprefix("https://github.com/"))
        if not found:
            raise ValueError(f"`{ref}` is not OWNER/REPO/.github/workflows/FILE.yml@refs/...")
        return cls(found["repo"], f"https://github.com/{found.group(0)}")


def bundle_problem(variant_dir: Path) -> str | None:
    """Why the variant's bundle cannot stand for its metadata.json; None when it
    can, or when the variant carries no bundle (unsigned)."""
    path = Path(variant_dir) / SIGNATURE
    if not path.is_file():
        return None
    # only now: sigstore's import costs more CPU than the rest of a small push
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from sigstore.models import Bundle, InvalidBundle

    try:
        bundle = Bundle.from_json(path.read_bytes())  # the parser `kernels.verify` uses
    except (InvalidBundle, ValueError) as err:
        return f"{SIGNATURE} is not a sigstore bundle: {err}"
    signed = bundle._inner.message_signature
    if signed is None or signed.message_digest is None:
        return f"{SIGNATURE} holds no signature over a file digest (a DSSE attestation, not a signed {METADATA})"
    metadata = (Path(variant_dir) / METADATA).read_bytes()
    actual = hashlib.sha256(metadata).digest()
    if signed.message_digest.algorithm.name != "SHA2_256" or signed.message_digest.digest != actual:
        return (f"{SIGNATURE} signs another {METADATA} (signed sha256 {signed.message_digest.digest.hex()[:16]}…, "
                f"the file's is {actual.hex()[:16]}…): the variant changed after signing")
    key = bundle.signing_certificate.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):  # sigstore's keyless certificates carry ECDSA keys
        return f"{SIGNATURE}: the certificate key is not an ECDSA key"
    try:
        key.verify(bundle.signature, metadata, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return f"{SIGNATURE}: the signature does not verify under the bundle's certificate"
    return None
