"""The kernel card (README.md on `main`).

With a project CARD.md it is rendered as a Jinja template with upstream's
variables (kernel-builder's card.rs: repo_id, functions, layers, has_benchmark,
upstream, license) plus ours (version, variants, benchmarks, load_call,
trust_note, benchmark_commands, signing). Without one, a card is generated:
front matter, a usage snippet that loads as written for the repo's owner (the
load call of publisher/consumer.py: trust_remote_code unless the Hub marks the
owner trusted), functions and layers read statically from the package's
`__all__`, the variants with where they were tested and on which GPUs
`kernels` loads each, what `publisher bench` measured for this release's
variants (a table and a plot per device: publisher/bench/card.py), and the
benchmark table and plot when benchmarks/results.json exists. A card whose
`kernels` calls cannot load the repo for its owner is refused (push PP402).

Every relative link of the card must resolve on `main`, where the card goes:
the project files it links (a plot, a results file, a doc) are committed with
it, and a link to a file the project lacks stops the push before any commit.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from publisher.bench.card import BenchSection
from publisher.consumer import LoadCall, Publisher, benchmark_commands
from publisher.errors import ProjectError
from publisher.project.model import Project
from publisher.push import gpus
from publisher.push.public_api import PublicApi
from publisher.push.signature import SignerWorkflow
from publisher.testing.protocol import CHECKED_ORIGINAL
from publisher.testing.report import OPS_RUN, describe_checks, status_label


@dataclass(frozen=True)
class VariantRow:
    name: str
    backend: str
    archs: tuple[str, ...]
    tested: str  # "passed on NVIDIA H100 (torch 2.11, CUDA 13.0)", "not tested", ...

    @property
    def loads_on(self) -> str:
        """The GPUs `kernels` loads it on, by its archs ("-" where unknown: a variant kept from an earlier push)."""
        return gpus.loads_on(self.backend, self.archs)


@dataclass(frozen=True)
class Card:
    text: str
    media: dict[str, Path]  # repo path -> local file (what the card links: plots, results, docs)


def _all_names(path: Path) -> list[str] | None:
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(node.value, (ast.List, ast.Tuple)):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


def functions_and_layers(package_dir: Path) -> tuple[list[str], list[str]]:
    """`__all__` minus "layers"; the layer classes when the package exports `layers`."""
    names = _all_names(package_dir / "__init__.py") or []
    functions = [n for n in names if n != "layers"]
    layers: list[str] = []
    if "layers" in names:
        for candidate in (package_dir / "layers.py", package_dir / "layers" / "__init__.py"):
            try:
                tree = ast.parse(candidate.read_text())
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            exported = _all_names(candidate)
            layers = [n.name for n in tree.body if isinstance(n, ast.ClassDef) and (exported is None or n.name in exported)]
            break
    return functions, layers


def api_section(api: PublicApi, version: int) -> list[str]:
    """The public API of this version, as `publisher push` keeps it: what callers of `version=N` may rely on."""
    out = ["## Public API", "",
           f"What version {version} keeps: a later push of version {version} may add to it, never remove or change it "
           "(that needs a new version).", ""]
    functions = api.functions()
    if functions:
        out += ["Functions:", ""] + [f"- `{name}{signature}`" for name, signature in functions] + [""]
    classes = api.classes()
    if classes:
        out += ["Classes and layers:", ""] + [f"- `{name}`" for name in classes] + [""]
    schemas = api.schemas()
    if schemas:
        out += ["Op schemas:", "", "```"] + schemas + ["```", ""]
    return out[:-1] if out[-1] == "" else out


def describe_test(entry: dict | None) -> str:
    if not entry:
        return "not tested"
    device = entry.get("device") or {}
    where = device.get("gpu") or "CPU"
    env = ", ".join(x for x in (f"torch {device['torch']}" if device.get("torch") else "",
                                f"CUDA {device['cuda']}" if device.get("cuda") else "") if x)
    counts = entry.get("tests") or {}
    status = entry.get("status", "?")
    if status == "loaded-not-run":  # no runner has its hardware: only the import and ops were checked
        return f"built and load-checked, not run on hardware (load check on {where}" + (f", {env})" if env else ")")
    label = status_label(entry, {"untested": "no test ran"})
    n = f" ({counts.get('passed', 0)} passed)" if status == "passed" else ""
    if status == "passed" and entry.get("suite") == "smoke":
        # no tests of its own: say what the verdict rests on
        calls = [c for c in entry.get("smoke") or [] if isinstance(c, dict)]
        exercised = sum(1 for c in calls if c.get("outcome") == "exercised")
        n = f" (smoke test only: {exercised} of {len(calls)} ops and functions called; the project has no tests)"
    elif status == "passed" and entry.get("suite") == OPS_RUN:
        # only adopt's generated tests passed: say whether any op was compared with a reference or the original
        n = f" ({describe_checks(entry)}; the project has no tests of its own)"
    elif status == "passed" and (entry.get("checks") or {}).get(CHECKED_ORIGINAL):
        n = f" ({counts.get('passed', 0)} passed: the project's tests, and {describe_checks(entry)})"
    runs = [r for r in entry.get("runs") or [] if isinstance(r, dict)]
    if runs and status == "passed":  # tested in remote jobs: every GPU it passed on, and where
        gpus = ", ".join(dict.fromkeys(str(r.get("gpu") or r.get("flavor")) for r in runs if r.get("status") == "passed"))
        jobs = ", ".join(dict.fromkeys(f"{r.get('place')} {r.get('flavor')}" for r in runs))
        return f"{label}{n} on {gpus}" + (f" ({env}; {jobs})" if env else f" ({jobs})")
    return f"{label}{n} on {where}" + (f" ({env})" if env else "")


# markdown [text](target "title") / ![alt](target), and HTML src="..." / href="..."
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'(][^)]*)?\)|\b(?:src|href)\s*=\s*[\"']([^\"']+)[\"']")
_ABSOLUTE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|/|#)")


def linked_files(text: str, root: Path, source: str, generated: dict[str, Path] | None = None) -> dict[str, Path]:
    """The project files the card's relative links name (repo path -> file), and the `generated`
    files it links (repo path -> file made for it); `source` names the card in the error for a link to nothing."""
    media: dict[str, Path] = {}
    base = root.resolve()
    for match in _LINK.finditer(text):
        target = (match.group(1) or match.group(2)).split("#", 1)[0].split("?", 1)[0]
        if not target or _ABSOLUTE.match(target):
            continue
        made = (generated or {}).get(target.removeprefix("./"))
        if made is not None:
            media[target.removeprefix("./")] = made
            continue
        local = (base / target).resolve()
        rel = local.relative_to(base).as_posix() if local.is_relative_to(base) else None
        if rel == "README.md":  # the card itself
            continue
        if rel is None or not local.is_file():
            raise ProjectError(f"{source}: the card links `{target}`, which is not a file of the project, "
                               "so it would not resolve on the Hub",
                               "add the file under the project folder, or link it with an absolute URL, or remove the link")
        media[rel] = local
    return dict(sorted(media.items()))


def _benchmarks(root: Path) -> tuple[str, list[str]]:
    """A markdown table from benchmarks/results.json, and the plots beside it."""
    folder = root / "benchmarks"
    plots = [f"benchmarks/{p.name}" for p in sorted(folder.glob("*.png"))] if folder.is_dir() else []
    try:
        data = json.loads((folder / "results.json").read_text())
    except (OSError, ValueError):
        return "", plots
    rows = data.get("results", data) if isinstance(data, dict) else data
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        return "", plots
    columns = list(dict.fromkeys(k for r in rows for k in r if not isinstance(r[k], (dict, list))))

    def fmt(value) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    context = data.get("device") or data.get("environment") if isinstance(data, dict) else None
    if isinstance(context, dict):
        lines.append("")
        lines.append("Measured on " + ", ".join(f"{k} {v}" for k, v in context.items()) + ".")
    elif isinstance(context, str):
        lines += ["", f"Measured on {context}."]
    return "\n".join(lines), plots


def _front_matter(project: Project, backends: list[str]) -> str:
    general = project.config.general
    tags = list(dict.fromkeys(["kernels", "kernel", *backends]))
    return "---\n" + yaml.safe_dump({"library_name": "kernels", "license": general.license.lower(), "tags": tags},
                                    sort_keys=False) + "---\n"


def _missing_section(missing: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    if not missing:
        return []
    out = ["", "## Missing variants", "",
           "This release is partial: it lacks these required variants, so `get_kernel` finds no build for them:", ""]
    out += [f"- {platform}: " + ", ".join(f"`{n}`" for n in names) for platform, names in missing]
    return out


def signing_section(call: LoadCall, signer: SignerWorkflow | None) -> list[str]:
    """How a consumer checks the sigstore signatures of this release. `kernels verify-signature` is not
    shown: it checks against kernels-community's own workflows only, and downloads without trust_remote_code."""
    out = ["## Signatures", "",
           "Each variant's `metadata.json` (which holds the sha256 of every other file) is signed with sigstore "
           "keyless signing from GitHub Actions; the bundle is `metadata.json.sigstore` beside it.", ""]
    if signer is None:
        return out + ["The signing workflow was not recorded at publication, so no verification policy can be "
                      "given here; `kernels verify-signature` trusts only kernels-community's own workflows."]
    why = call.why()
    return out + [
        "`kernels verify-signature` trusts only kernels-community's own workflows, so check the variant "
        "against this repository's signer:", "",
        "```python",
        "from kernels import install_kernel",
        "from kernels.verify import GitHubWorkflowPolicy, VerificationResult, verify_variant", "",
        *([why] if why else []),
        f"path = {call.render('install_kernel')}",
        f'policy = GitHubWorkflowPolicy(repo_id="{signer.repo}", signer_uris=["{signer.uri}"])',
        "assert isinstance(verify_variant(path, policies=[policy]), VerificationResult.Success)",
        "```",
    ]


def usage_section(call: LoadCall, functions: list[str]) -> list[str]:
    """"How to use": a python block that runs as written, for this owner (trusted or not)."""
    why = call.why()
    out = ["## How to use", "", "```python", "# pip install -U kernels", "from kernels import get_kernel", ""]
    out += [*([why] if why else []), f"kernel = {call.render()}"]
    if functions:
        out.append(f"print(kernel.{functions[0]})  # call it as kernel.{functions[0]}(...)")
    return out + ["```"]


def variants_section(variants: list[VariantRow]) -> list[str]:
    """The variants, with where they were tested and on which GPUs `kernels` loads each."""
    out = ["## Variants", "", "| variant | backend | architectures | loads on | tested |", "|---|---|---|---|---|"]
    return out + [f"| `{v.name}` | {v.backend} | {', '.join(v.archs) or '-'} | {v.loads_on} | {v.tested} |"
                  for v in variants]


def benchmark_run_lines(repo_id: str, version: int) -> list[str]:
    """How a consumer runs the published benchmarks."""
    return ["Run them on your machine:", "", "```bash", *benchmark_commands(repo_id, version), "```"]


_KERNELS_CALL = re.compile(r"\b(?:get_kernel|has_kernel|install_kernel)\(\s*([\"'])(?P<repo>[^\"']+)\1(?P<rest>[^)]*)\)")


def unloadable_calls(text: str, call: LoadCall) -> list[str]:
    """The card's `kernels` calls for this repository that cannot load it for this owner: without
    `trust_remote_code` where the Hub does not mark the owner a trusted kernel publisher."""
    if call.trust_remote_code is None:
        return []
    return [m.group(0) for m in _KERNELS_CALL.finditer(text)
            if m.group("repo") == call.repo_id and "trust_remote_code" not in m.group("rest")]


def render(project: Project, repo_id: str, version: int, variants: list[VariantRow],
           missing: tuple[tuple[str, tuple[str, ...]], ...] = (), signer: SignerWorkflow | None = None,
           signed: bool = False, measured: BenchSection | None = None, api: PublicApi | None = None,
           publisher: Publisher = Publisher.UNKNOWN) -> Card:
    """`missing`: (platform, required variants) this release lacks (push --partial); `measured`: what
    `publisher bench` measured for these variants, per device (its plots go with the card); `api`: the
    public API this version keeps (push refuses to change it), listed in its own section; `publisher`:
    what the Hub says of the repo's owner, which decides the load call consumers need."""
    call = LoadCall(repo_id, version, publisher)
    root = project.root
    assert root is not None
    functions, layers = functions_and_layers(project.package_dir)
    bench_table, plots = _benchmarks(root)
    has_benchmark = (root / "benchmarks").is_dir() and any(p.is_file() for p in (root / "benchmarks").glob("benchmark*.py"))
    backends = sorted({v.backend for v in variants})
    generated = measured.media if measured else {}
    template = root / "CARD.md"
    if template.is_file():
        import jinja2
        from jinja2 import meta

        env = jinja2.Environment(trim_blocks=True, undefined=jinja2.ChainableUndefined, keep_trailing_newline=True)
        source = template.read_text()
        benchmarks = "\n\n".join(x for x in (measured.markdown if measured else "", bench_table) if x)
        text = env.from_string(source).render(
            repo_id=repo_id, functions=functions or None, layers=layers or None, has_benchmark=has_benchmark,
            upstream=project.config.general.upstream, license=project.config.general.license.lower(),
            version=version, variants=variants, benchmarks=benchmarks, missing=missing,
            signing="\n".join(signing_section(call, signer)) if signed else None,
            load_call=call.render(), trust_note=call.why() or "",
            benchmark_commands="\n".join(benchmark_commands(repo_id, version)),
            variants_table="\n".join(variants_section(variants)[2:]),
        )
        if not text.startswith("---"):
            text = _front_matter(project, backends) + "\n" + text
        if missing and "## Missing variants" not in text:
            text = text.rstrip() + "\n" + "\n".join(_missing_section(missing)) + "\n"
        if variants and not {"variants", "variants_table"} & meta.find_undeclared_variables(env.parse(source)):
            # the template shows no variants: which GPUs kernels loads each on still reaches the card
            text = text.rstrip() + "\n\n" + "\n".join(variants_section(variants)) + "\n"
        if measured and "benchmarks" not in meta.find_undeclared_variables(env.parse(source)):
            # the template has no place for them: the measurements still reach the card
            text = text.rstrip() + "\n\n## Benchmark results\n\n" + measured.markdown + "\n"
        if api is not None and api.entries:
            text = text.rstrip() + "\n\n" + "\n".join(api_section(api, version)) + "\n"
        return Card(text, linked_files(text, root, str(template), generated))

    out = [_front_matter(project, backends), f"# {project.name}", ""]
    out += [f"A kernel for the [`kernels`](https://github.com/huggingface/kernels) library, version {version} "
            f"(branch `v{version}`). This card was generated by publisher.", ""]
    out += [*usage_section(call, functions), ""]
    out += ["## Functions", ""] + ([f"- `{f}`" for f in functions] or ["No functions are exported (`__all__`)."])
    if layers:
        out += ["", "## Layers", "", "For `kernels.kernelize`, under `kernel.layers`:", ""]
        out += [f"- `{layer}`" for layer in layers]
    out += ["", *variants_section(variants)]
    out += _missing_section(missing)
    if measured or bench_table or plots:
        out += ["", "## Benchmarks", ""]
        if measured:
            out += [measured.markdown, ""]
        if bench_table:
            out += [bench_table, ""]
        out += [f"![{Path(p).stem}]({p})" for p in plots]
        if has_benchmark:
            out += ["", *benchmark_run_lines(repo_id, version)]
    if signed:
        out += ["", *signing_section(call, signer)]
    if api is not None and api.entries:
        out += ["", *api_section(api, version)]
    if project.config.general.upstream:
        out += ["", "## Source", "", f"Adapted from {project.config.general.upstream}."]
    text = "\n".join(out).rstrip() + "\n"
    return Card(text, linked_files(text, root, "the generated card", generated))
