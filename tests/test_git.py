"""publisher/git.py: the project's git state, where there is git and where there is none."""

def test_without_git_installed_a_project_has_no_git_state(tmp_path, monkeypatch):
    # a container image without git (a build job's) builds as well: no commit recorded, no crash
    from publisher import git

    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    assert git.git_state(tmp_path) is None and git.toplevel(tmp_path) is None and not git.tracks(tmp_path, tmp_path)
