"""The reference pages of the documentation site, rendered from the catalogues themselves (the
finding codes, build.toml's schema, publisher.toml's settings, the shipped matrix), so the site
cannot say something the code does not do. docs/hooks.py puts them into the pages at build time."""

from __future__ import annotations

import inspect

from publisher.codes import CODES, FIXES
from publisher.data import data_path
from publisher.project import schema, settings

_KINDS = {"str": "string", "int": "integer", "strlist": "list of strings", "table": "table",
          "tablelist": "list of tables", "version-or-table": "version, or table of backend = version"}
_COMMANDS = {"PB": "check", "PP": "push, release", "PA": "adopt"}


def findings_table() -> str:
    """Every finding code: its command, default severity, meaning and the fix in general."""
    lines = ["| code | command | severity | meaning | fix |", "| --- | --- | --- | --- | --- |"]
    for code, (severity, meaning) in sorted(CODES.items()):
        cells = (meaning, FIXES[code])
        lines.append(f"| `{code}` | {_COMMANDS.get(code[:2], '')} | {severity.value} | "
                     + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def build_toml_table() -> str:
    """Every key an edition-5 build.toml may hold, with its type, and the kernel backends that take it."""
    lines = ["| key | type | required | kernel backends |", "| --- | --- | --- | --- |"]
    for path, key in schema.fields(5, "NAME"):
        backends = ""
        if path.startswith("kernel.NAME."):
            name = path.removeprefix("kernel.NAME.")
            backends = ", ".join(b for b, fields in schema.KERNEL_FIELDS.items() if name in fields)
        lines.append(f"| `{path}` | {_KINDS.get(key.kind, key.kind)} | {'yes' if key.required else ''} | {backends} |")
    return "\n".join(lines)


def publisher_toml() -> str:
    """publisher.toml's keys, as the module that reads them documents them."""
    doc = inspect.getdoc(settings) or ""
    block = [line for line in doc.splitlines() if line.startswith("    ")]
    return "```toml\n" + "\n".join(line[4:] for line in block) + "\n```"


def default_matrix() -> str:
    """The matrix publisher ships, as it ships it (its comments explain each key)."""
    return "```yaml\n" + data_path("matrix.yaml").read_text().rstrip() + "\n```"


SECTIONS = {"findings": findings_table, "build-toml": build_toml_table, "publisher-toml": publisher_toml,
            "matrix-yaml": default_matrix}


def render(markdown: str) -> str:
    """`<!-- generated: NAME -->` markers replaced with their section."""
    for name, make in SECTIONS.items():
        marker = f"<!-- generated: {name} -->"
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
