"""The NAR hash publisher checks fetched sources with is Nix's own: computed here
and by the real `nix-hash` on the same trees (CI installs nix: .ci/setup-nix.sh)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from publisher.builder.nar import nar_sha256

pytestmark = pytest.mark.skipif(shutil.which("nix-hash") is None,
                                reason="nix-hash is not installed (CI installs nix with .ci/setup-nix.sh)")


def nix_hash(path) -> str:
    out = subprocess.run(["nix-hash", "--type", "sha256", "--sri", str(path)], capture_output=True, text=True)
    if out.returncode != 0:  # nix 2.8 without --sri: the same hash, asked through `nix hash path`
        out = subprocess.run(["nix", "--extra-experimental-features", "nix-command", "hash", "path", str(path)],
                             capture_output=True, text=True, check=True)
    return out.stdout.strip()


def write_tree(root):
    """What a release archive holds: nested folders, an empty one, empty and large files, an executable,
    links (one dangling), and names whose order differs between bytewise and other sorts."""
    (root / "include/cutlass/arch").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "include/cutlass/cutlass.h").write_text("#pragma once\n")
    (root / "include/cutlass/arch/mma.h").write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    (root / "empty.txt").write_text("")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("include/cutlass/cutlass.h", root / "cutlass.h")
    os.symlink("../nowhere", root / "include/dangling")
    for name in ("B", "a", "a-b", "a.b", "a_b", "ü.txt", "Z9"):
        (root / name).write_text(name * 3)
    return root


def test_a_folder_hashes_as_nix_hashes_it(tmp_path):
    tree = write_tree(tmp_path / "tree")
    assert nar_sha256(tree) == nix_hash(tree)


def test_each_kind_of_node_hashes_as_nix_hashes_it(tmp_path):
    tree = write_tree(tmp_path / "tree")
    for node in ("run.sh", "empty.txt", "include/cutlass/arch/mma.h", "empty", "include"):
        assert nar_sha256(tree / node) == nix_hash(tree / node), node


def test_what_nix_records_changes_the_hash_and_nothing_else(tmp_path):
    tree = write_tree(tmp_path / "tree")
    before = nar_sha256(tree)
    os.chmod(tree / "empty.txt", 0o640)  # not the owner's x bit: Nix records no other permission
    os.utime(tree / "B", (1, 1))  # nor times
    assert nar_sha256(tree) == before == nix_hash(tree)
    os.chmod(tree / "empty.txt", 0o744)
    assert nar_sha256(tree) != before
    assert nar_sha256(tree) == nix_hash(tree)
