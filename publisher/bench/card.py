"""The kernel card's benchmark results: per device, a table of what `publisher
bench` measured for the variants of this release (stale entries, of a build
since replaced, left out), how it was measured, and the device's plot, which
goes to the Hub repo with the card (media/benchmark-<device-key>.svg)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from publisher.bench import plot
from publisher.bench.results import TIMED, DeviceResults, current_results, device_key, fmt_ms

MEDIA_DIR = "media"


@dataclass(frozen=True)
class BenchSection:
    markdown: str
    media: dict[str, Path]  # repo path -> the plot written here


def card_section(build_dir: Path, variants: Mapping[str, Path], out_dir: Path) -> BenchSection | None:
    """The section for `variants` (name -> build folder); plots written to out_dir. None without results."""
    devices = current_results(build_dir, variants)
    if not devices:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    parts, media = [], {}
    for device in devices:
        key = device.device.get("key") or device_key(device.device)
        local = out_dir / f"benchmark-{key}.svg"
        local.write_text(plot.device_svg(device))
        repo_path = f"{MEDIA_DIR}/benchmark-{key}.svg"
        media[repo_path] = local
        parts.append(device_markdown(device, repo_path))
    return BenchSection("\n\n".join(parts), media)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _outcome(w: dict) -> str:
    status = w.get("status")
    if status == "verified":
        return "matches"
    if status == "unverified":
        return "not checked (no verify method)"
    if status == "failed":
        return "**differs**: " + (w.get("verify") or {}).get("detail", "")
    if status == "not-run":
        return "not run"
    return "error: " + (w.get("error") or {}).get("message", "")


def device_markdown(device: DeviceResults, plot_path: str) -> str:
    info = device.device
    title = str(info.get("name"))
    facts = [f"compute capability {info['capability']}" if info.get("capability") else "",
             f"{info['memory_gib']} GiB" if info.get("memory_gib") else ""]
    lines = [f"### {title}" + (f" ({', '.join(f for f in facts if f)})" if any(facts) else ""), "",
             "| variant | benchmark | kernel | spread (IQR) | reference | speedup | output |",
             "|---|---|---|---|---|---|---|"]
    references: dict[str, str] = {}
    notes = []
    for variant, entry in device.variants.items():
        workloads = entry.get("workloads") or []
        if not workloads:
            lines.append(f"| `{variant}` | — | — | — | — | — | error: {_cell(entry.get('reason', ''))} |")
        for w in workloads:
            name = f"{w.get('benchmark', '?')}.{w.get('workload', '?')}"
            kernel, reference = w.get("kernel") or {}, w.get("reference") or {}
            timed = w.get("status") in TIMED and kernel
            spread = f"{100 * kernel['iqr_ms'] / kernel['median_ms']:.1f} %" if timed and kernel["median_ms"] else "—"
            speedup = f"{w['speedup']:.2f}x" if w.get("speedup") else "—"
            lines.append(f"| `{variant}` | `{name}` | {fmt_ms(kernel.get('median_ms')) if timed else '—'} | {spread} | "
                         f"{fmt_ms(reference.get('median_ms')) if timed and reference else '—'} | {speedup} | "
                         f"{_cell(_outcome(w))} |")
            if w.get("reference_source"):
                references[f"{w.get('benchmark')}.verify_{w.get('workload')}"] = w["reference_source"]
        notes.append(_method(variant, entry, int(info.get("cache_bytes") or 0)))
    lines += ["", f"![Benchmarks on {title}]({plot_path})", ""]
    lines += notes
    if references:
        lines += ["", "References (what each `verify_<workload>` returns):", ""]
        lines += [f"- `{name}`: `{_cell(source)}`" for name, source in sorted(references.items())]
    return "\n".join(lines)


def _method(variant: str, entry: dict, cache_bytes: int) -> str:
    """How the variant's numbers were taken, in one line."""
    env, method = entry.get("device") or {}, entry.get("method") or {}
    software = ", ".join(x for x in (f"torch {env['torch']}" if env.get("torch") else "",
                                     f"CUDA {env['cuda']}" if env.get("cuda") else "",
                                     f"driver {env['driver']}" if env.get("driver") else "") if x)
    timed = [w for w in entry.get("workloads") or [] if w.get("status") in TIMED and w.get("kernel")]
    spans = sorted(w["rotation_bytes"] / cache_bytes for w in timed if w.get("rotation_bytes") and w.get("copies", 1) > 1
                   and cache_bytes)
    rotated = ""
    if spans:
        span = f"{spans[0]:.1f}x" if f"{spans[0]:.1f}" == f"{spans[-1]:.1f}" else f"{spans[0]:.1f}x to {spans[-1]:.1f}x"
        rotated = f", inputs rotated over copies spanning {span} the {cache_bytes / 2**20:.0f} MiB last-level cache"
    when = str(entry.get("time") or "")[:10]
    if env.get("place"):
        when += f" in {env['place']} job {env.get('job')} ({env.get('flavor')})"
    return (f"`{variant}` ({software or 'environment not recorded'}): median of {method.get('iterations', '?')} "
            f"samples per workload after {method.get('warmup', '?')} warm-up calls, each sample at least "
            f"{method.get('sample_ms', '?')} ms of calls launched one after another from Python, timed with "
            f"{method.get('clock', '?')}{rotated}; kernel and reference take turns. Measured {when} with "
            "`publisher bench`.")
