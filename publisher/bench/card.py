"""What `push` puts on the card from `publisher bench`: per device, a table of every
workload of the variants being published (results of a variant rebuilt since are left
out: its fingerprint no longer matches) and a bar chart (SVG) of the kernel against the
benchmark's reference."""

from __future__ import annotations

import json
from collections.abc import Iterable
from html import escape
from pathlib import Path

from publisher import state
from publisher.bench.stage import bench_dir


def _current(build_dir: Path, variant: str) -> str | None:
    try:
        return state.variant_fingerprint(build_dir / variant)
    except OSError:
        return None


def _rows(build_dir: Path, variants: Iterable[str]) -> list[tuple[str, dict, list[tuple[str, dict]]]]:
    """(device key, device, [(variant, row)]) per device file, fresh results of `variants` only."""
    out = []
    wanted = set(variants)
    for path in sorted(bench_dir(build_dir).glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        rows = [(name, row) for name, entry in sorted((data.get("variants") or {}).items())
                if name in wanted and entry.get("fingerprint") == _current(build_dir, name)
                for row in entry.get("rows") or [] if not row.get("error") and row.get("median_ms") is not None]
        if rows:
            out.append((path.stem, data.get("device") or {}, rows))
    return out


def svg(rows: list[tuple[str, dict]], title: str) -> str:
    """Horizontal bars: each workload's median time, the kernel's and the reference's."""
    bars = []
    for variant, row in rows:
        label = f"{row['benchmark']}.{row['workload']}" + (f" [{variant}]" if len({v for v, _ in rows}) > 1 else "")
        bars.append((label, "kernel", row["median_ms"]))
        if row.get("reference_ms") is not None:
            bars.append((label, "reference", row["reference_ms"]))
    top = max(v for _, _, v in bars) or 1.0
    height, width, left = 22, 640, 260
    lines = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width + left + 90}" height="{len(bars) * height + 40}" '
             'font-family="sans-serif" font-size="12">', f'<text x="4" y="16" font-weight="bold">{escape(title)}</text>']
    for i, (label, kind, value) in enumerate(bars):
        y = 28 + i * height
        length = max(1.0, width * value / top)
        colour = "#ff9d00" if kind == "kernel" else "#8da0b6"
        lines.append(f'<text x="4" y="{y + 14}">{escape(label)} ({kind})</text>')
        lines.append(f'<rect x="{left}" y="{y + 3}" width="{length:.1f}" height="{height - 6}" fill="{colour}"/>')
        lines.append(f'<text x="{left + length + 4:.1f}" y="{y + 14}">{value:.4g} ms</text>')
    lines.append("</svg>")
    return "\n".join(lines) + "\n"


def section(build_dir: Path, variants: Iterable[str]) -> tuple[list[str], dict[str, Path]]:
    """Card lines and the files they link (repo path -> local file)."""
    devices = _rows(build_dir, variants)
    if not devices:
        return [], {}
    lines = ["", "## Benchmarks by device", "",
             "Measured with `publisher bench` (the project's `benchmarks/benchmark*.py`): each call launched from "
             "Python on the current stream, timed with CUDA events (on a CPU, wall clock), inputs rotated over "
             "copies larger than the GPU's L2 cache; median of the timed calls. The reference is the benchmark's "
             "`verify_*` function, timed the same way.", ""]
    media: dict[str, Path] = {}
    for key, device, rows in devices:
        where = device.get("gpu") or f"CPU ({device.get('platform')})"
        extra = ", ".join(x for x in (f"torch {device.get('torch')}", f"CUDA {device['cuda']}" if device.get("cuda") else "",
                                      f"{device.get('place')} {device.get('flavor')}" if device.get("place") else "") if x)
        lines += [f"### {where}", "", f"{extra}.", "",
                  "| variant | benchmark | workload | median ms | IQR ms | reference ms | speedup | verified |",
                  "|---|---|---|---|---|---|---|---|"]
        for variant, row in rows:
            ref = f"{row['reference_ms']:.4g}" if row.get("reference_ms") is not None else "-"
            speed = f"{row['speedup']:.2f}x" if row.get("speedup") else "-"
            ok = {True: "yes", False: "no", None: "-"}[row.get("verified")]
            lines.append(f"| `{variant}` | {row['benchmark']} | {row['workload']} | {row['median_ms']:.4g} | "
                         f"{row['iqr_ms']:.3g} | {ref} | {speed} | {ok} |")
        plot = bench_dir(build_dir) / f"{key}.svg"
        plot.write_text(svg(rows, f"{where}: median ms per call (lower is better)"))
        repo_path = f"benchmarks/publisher/{key}.svg"
        media[repo_path] = plot
        lines += ["", f"![{where}]({repo_path})", ""]
    return lines, media
