"""Signed releases, push side: a variant's metadata.json.sigstore travels with it,
must be a sigstore bundle over exactly that metadata.json, and the card tells
consumers how to verify. The bundles are made here, in sigstore's v0.3 format,
with a self-made certificate and key: Fulcio (certificates) and Rekor (the log)
are unreachable, so the chain to sigstore's roots and the log inclusion are not
exercised; `kernels verify-signature` checks those after a real release."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from huggingface_hub import HfApi, snapshot_download

from publisher.builder.metadata import check_variant
from publisher.push.signature import GITHUB_ISSUER, bundle_problem

from cli_helper import run_cli
from push_fixtures import load_kernel, repo_name

# end-to-end: a built and tested project published to the Hub server and loaded back (seconds a test)
pytestmark = pytest.mark.slow

WORKFLOW_REF = "acme/kernels-ci/.github/workflows/release.yml@refs/heads/main"
SIGNER_URI = f"https://github.com/{WORKFLOW_REF}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _utf8(text: str) -> bytes:
    """DER UTF8String (short form), as Fulcio encodes its v2 OIDC extensions."""
    return b"\x0c" + bytes([len(text)]) + text.encode()


def _github_identity(workflow_ref: str) -> list[x509.UnrecognizedExtension]:
    """The OIDC claims Fulcio writes into a certificate for a GitHub Actions run."""
    repo = workflow_ref.split("/.github/")[0]
    return [
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1"), GITHUB_ISSUER.encode()),
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8"), _utf8(GITHUB_ISSUER)),
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.9"), _utf8(f"https://github.com/{workflow_ref}")),
        x509.UnrecognizedExtension(x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.12"), _utf8(f"https://github.com/{repo}")),
    ]


def sign(variant_dir: Path, key: ec.EllipticCurvePrivateKey | None = None, cert_key: ec.EllipticCurvePrivateKey | None = None,
         workflow_ref: str = WORKFLOW_REF) -> None:
    """Write metadata.json.sigstore as `sigstore sign --bundle` lays it out (message
    signature over the file's bytes, leaf certificate carrying the signing workflow's
    identity, one hashedrekord log entry). `cert_key` other than `key` makes a
    certificate that does not match the signature."""
    key = key or ec.generate_private_key(ec.SECP256R1())
    cert_key = cert_key or key
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "publisher tests")])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(cert_key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(minutes=10)))
    for extension in _github_identity(workflow_ref):
        builder = builder.add_extension(extension, critical=False)
    cert = builder.sign(key, hashes.SHA256())
    metadata = (variant_dir / "metadata.json").read_bytes()
    bundle = {
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": {
            "certificate": {"rawBytes": _b64(cert.public_bytes(serialization.Encoding.DER))},
            "tlogEntries": [{
                "logIndex": "7", "logId": {"keyId": _b64(b"k" * 32)},
                "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                "integratedTime": str(int(now.timestamp())),
                "inclusionPromise": {"signedEntryTimestamp": _b64(b"not checked offline")},
                "inclusionProof": {"logIndex": "7", "rootHash": _b64(b"r" * 32), "treeSize": "8",
                                   "hashes": [_b64(b"h" * 32)],
                                   "checkpoint": {"envelope": "log - 1\n8\ncm9vdA==\n\n— log c2ln\n"}},
                "canonicalizedBody": _b64(b"{}"),
            }],
        },
        "messageSignature": {
            "messageDigest": {"algorithm": "SHA2_256", "digest": _b64(hashlib.sha256(metadata).digest())},
            "signature": _b64(key.sign(metadata, ec.ECDSA(hashes.SHA256()))),
        },
    }
    (variant_dir / "metadata.json.sigstore").write_text(json.dumps(bundle))


def _push(hub, project, repo, *args, env=None):
    return run_cli("push", repo, str(project), "--allow-untested", *args, env=env or hub.env())


def test_signed_release_uploads_bundles_verifies_them_and_the_card_says_how(hub_env, scale_project, tmp_path):
    build = scale_project / "build"
    for variant in ("torch-cpu", "torch-cuda"):
        sign(build / variant)
        assert check_variant(build / variant).ok  # the bundle lies outside the digest, as `kernels` hashes
    repo = repo_name()
    result = _push(hub_env, scale_project, repo, env={**hub_env.env(), "GITHUB_WORKFLOW_REF": WORKFLOW_REF})
    assert result.returncode == 0, result.stderr
    assert "verified: 11 file(s) on v1" in result.stdout  # 9 files + one bundle per variant, checked on the branch

    # What a consumer downloads: bundle and metadata.json byte-identical, the bundle still signs the metadata.
    api = HfApi(endpoint=hub_env.url, token=hub_env.write_token)
    local = Path(snapshot_download(repo, repo_type="kernel", revision="v1", local_dir=tmp_path / "dl",
                                   endpoint=hub_env.url, token=hub_env.write_token))
    for variant in ("torch-cpu", "torch-cuda"):
        got = local / "build" / variant
        assert (got / "metadata.json.sigstore").read_bytes() == (build / variant / "metadata.json.sigstore").read_bytes()
        assert bundle_problem(got) is None and check_variant(got).ok
    loaded = load_kernel(hub_env.env(), f"""
        import torch, kernels
        print("RESULT", kernels.get_kernel("{repo}", version=1).scale(torch.ones(2), 3.0).tolist())
    """)
    assert "RESULT [3.0, 3.0]" in loaded.stdout, loaded.stderr

    readme = Path(api.hf_hub_download(repo, "README.md", repo_type="kernel")).read_text()
    assert "## Signatures" in readme
    assert f'GitHubWorkflowPolicy(repo_id="acme/kernels-ci", signer_uris=["{SIGNER_URI}"])' in readme
    # That policy, as `kernels.verify` applies it, accepts the downloaded bundle's certificate and
    # nothing signed by another workflow (the chain to Fulcio's root is what cannot be checked here).
    from kernels.verify import GitHubWorkflowPolicy
    from sigstore.errors import VerificationError
    from sigstore.models import Bundle

    policy = GitHubWorkflowPolicy(repo_id="acme/kernels-ci", signer_uris=[SIGNER_URI])
    policy.verify(Bundle.from_json((local / "build" / "torch-cpu" / "metadata.json.sigstore").read_bytes()).signing_certificate)
    sign(build / "torch-cpu", workflow_ref="acme/kernels-ci/.github/workflows/other.yml@refs/heads/main")
    with pytest.raises(VerificationError):
        policy.verify(Bundle.from_json((build / "torch-cpu" / "metadata.json.sigstore").read_bytes()).signing_certificate)
    assert f'install_kernel("{repo}", version=1)' in readme  # a trusted org: the bare call
    # `kernels verify-signature` checks against kernels-community's workflows only: not a command for this repo
    assert "kernels verify-signature " + repo not in readme


def test_a_signature_that_does_not_stand_for_the_variant_is_refused(hub_env, scale_project):
    build = scale_project / "build"
    cpu = build / "torch-cpu" / "metadata.json"
    repo = repo_name()

    sign(build / "torch-cpu")
    meta = json.loads(cpu.read_text())
    meta["python-depends"] = ["einops"]  # the digest of the other files still matches; only the signature tells
    cpu.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    refused = _push(hub_env, scale_project, repo, "--variant", "torch-cpu")
    assert refused.returncode == 1
    assert "torch-cpu: metadata.json.sigstore signs another metadata.json" in refused.stderr

    sign(build / "torch-cpu", cert_key=ec.generate_private_key(ec.SECP256R1()))
    refused = _push(hub_env, scale_project, repo, "--variant", "torch-cpu")
    assert "the signature does not verify under the bundle's certificate" in refused.stderr

    (build / "torch-cpu" / "metadata.json.sigstore").write_text('{"mediaType": "nonsense"}')
    refused = _push(hub_env, scale_project, repo, "--variant", "torch-cpu")
    assert "metadata.json.sigstore is not a sigstore bundle" in refused.stderr and "Traceback" not in refused.stderr
    assert not HfApi(endpoint=hub_env.url, token=hub_env.write_token).repo_exists(repo, repo_type="kernel")


def test_unsigned_release_card_has_no_policy_and_a_bad_signer_is_a_usage_error(hub_env, scale_project):
    repo = repo_name()
    bad = _push(hub_env, scale_project, repo, "--signer-workflow", "acme/kernels-ci", "--dry-run")
    assert bad.returncode == 2 and "--signer-workflow (or GITHUB_WORKFLOW_REF)" in bad.stderr
    assert "Traceback" not in bad.stderr
    dry = _push(hub_env, scale_project, repo, "--dry-run", env={**hub_env.env(), "GITHUB_WORKFLOW_REF": WORKFLOW_REF})
    assert dry.returncode == 0, dry.stderr
    card = (scale_project / "build" / ".publisher" / "README.md").read_text()
    assert "## Signatures" not in card  # nothing was signed: no claim about signatures
