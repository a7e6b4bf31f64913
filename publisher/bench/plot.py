"""One device's benchmark results as an SVG bar chart (plain text, no plotting
library): the speedup of each workload over its reference where the benchmark
names one (verify_<workload>), else the kernel's median time."""

from __future__ import annotations

from xml.sax.saxutils import escape

from publisher.bench.results import TIMED, DeviceResults, fmt_ms

CHAR_W = 7.6  # a 12 px sans-serif character, wide enough for labels to fit
BAR_W = 360
VALUE_W = 250  # room right of the longest bar for its value
ROW_H = 24
TOP = 58
FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"
FASTER, SLOWER, MUTED, TEXT = "#3b78c4", "#d9822b", "#8a8a8a", "#222222"


def short_variant(name: str) -> str:
    """`torch211-cxx11-cu130-x86_64-linux` -> `torch211-cu130` (the rest is the same for every row)."""
    parts = [p for p in name.split("-") if p not in ("cxx11", "cxx98")]
    return "-".join(p for p in parts if p not in ("x86_64", "aarch64", "linux", "darwin", "windows")) or name


def _rows(device: DeviceResults) -> list[tuple[str, dict]]:
    several = len(device.variants) > 1
    rows = []
    for variant, entry in device.variants.items():
        for w in entry.get("workloads") or []:
            label = f"{w.get('benchmark', '?')}.{w.get('workload', '?')}"
            rows.append((f"{short_variant(variant)}: {label}" if several else label, w))
    return rows


def device_svg(device: DeviceResults) -> str:
    rows = _rows(device)
    by_speedup = any(w.get("speedup") for _, w in rows)
    values = [w.get("speedup") if by_speedup else (w.get("kernel") or {}).get("median_ms") for _, w in rows]
    top = max([v for v in values if v] + [1.0 if by_speedup else 0.0]) * 1.15 or 1.0
    scale = BAR_W / top
    entries = list(device.variants.values())
    env = entries[0].get("device") or {} if entries else {}
    software = ", ".join(x for x in (f"torch {env['torch']}" if env.get("torch") else "",
                                     f"CUDA {env['cuda']}" if env.get("cuda") else "") if x)
    what = "speedup over the reference (median, higher is better)" if by_speedup else \
        "kernel time per call (median, lower is better)"
    height = TOP + ROW_H * max(1, len(rows)) + 30
    x0 = round(30 + CHAR_W * max([len(label) for label, _ in rows] + [10]))
    width = x0 + BAR_W + VALUE_W
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' {FONT} font-size='12'>",
           f"<rect width='{width}' height='{height}' fill='white'/>",
           f"<text x='12' y='22' font-size='15' font-weight='bold' fill='{TEXT}'>{escape(str(device.device.get('name')))}</text>",
           f"<text x='12' y='42' fill='{MUTED}'>{escape(what)}{escape('; ' + software if software else '')}</text>"]
    if by_speedup:  # the reference's own speed
        x1 = x0 + scale
        out.append(f"<line x1='{x1:.1f}' y1='{TOP - 6}' x2='{x1:.1f}' y2='{TOP + ROW_H * len(rows)}' stroke='{MUTED}' "
                   "stroke-dasharray='4 3'/>")
        out.append(f"<text x='{x1:.1f}' y='{TOP + ROW_H * len(rows) + 16}' text-anchor='middle' fill='{MUTED}'>"
                   "1x = reference</text>")
    for i, ((label, w), value) in enumerate(zip(rows, values, strict=True)):
        y = TOP + i * ROW_H
        out.append(f"<text x='{x0 - 8}' y='{y + 15}' text-anchor='end' fill='{TEXT}'>{escape(label)}</text>")
        if w.get("status") not in TIMED:
            note = {"failed": "output differs from the reference", "not-run": "not run"}.get(w.get("status"), "error")
            out.append(f"<text x='{x0 + 4}' y='{y + 15}' fill='{SLOWER if w.get('status') == 'failed' else MUTED}'>"
                       f"{escape(note)}</text>")
            continue
        if not value:
            out.append(f"<text x='{x0 + 4}' y='{y + 15}' fill='{MUTED}'>no reference (verify_{escape(str(w.get('workload')))} "
                       "missing)</text>")
            continue
        color = FASTER if not by_speedup or value >= 1 else SLOWER
        bar = max(1.0, value * scale)
        out.append(f"<rect x='{x0}' y='{y + 4}' width='{bar:.1f}' height='{ROW_H - 8}' fill='{color}'/>")
        text = f"{value:.2f}x" if by_speedup else fmt_ms(value)
        if by_speedup:
            text += f"  ({fmt_ms(w['kernel']['median_ms'])} vs {fmt_ms(w['reference']['median_ms'])})"
        out.append(f"<text x='{x0 + bar + 6:.1f}' y='{y + 15}' fill='{TEXT}'>{escape(text)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
