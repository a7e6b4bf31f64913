"""The bench results as the terminal shows them: per variant, where it ran,
then one row per workload (kernel median, spread, reference, speedup, whether
the output matched), then what went wrong, with the benchmark's own traceback."""

from __future__ import annotations

from publisher.bench.results import TIMED, VariantBench, fmt_ms

DETAIL_LINES = 12


def _where(result: VariantBench) -> str:
    device = result.device
    software = ", ".join(x for x in (f"torch {device['torch']}" if device.get("torch") else "",
                                     f"CUDA {device['cuda']}" if device.get("cuda") else "") if x)
    job = f", {device['place']} job {device.get('job')} ({device.get('flavor')})" if device.get("place") else ""
    return f" on {device.get('name')}" + (f" ({software}{job})" if software or job else "") if device.get("name") else ""


def _row(w: dict) -> tuple[str, ...]:
    kernel, reference = w.get("kernel") or {}, w.get("reference") or {}
    timed = w.get("status") in TIMED and kernel
    outcome = {"verified": "matches", "unverified": "not checked", "failed": "DIFFERS", "not-run": "not run"}
    return (f"{w.get('benchmark', '?')}.{w.get('workload', '?')}",
            fmt_ms(kernel.get("median_ms")) if timed else "-",
            f"{100 * kernel['iqr_ms'] / kernel['median_ms']:.1f}%" if timed and kernel["median_ms"] else "-",
            fmt_ms(reference.get("median_ms")) if timed and reference else "-",
            f"{w['speedup']:.2f}x" if w.get("speedup") else "-",
            f"{kernel.get('samples')}x{kernel.get('calls_per_sample')}" if timed else "-",
            outcome.get(w.get("status"), "ERROR"))


def _detail(text: str) -> list[str]:
    lines = [line for line in (text or "").rstrip().splitlines() if line.strip()]
    return [f"      {line}" for line in lines[-DETAIL_LINES:]]


def render_table(results: list[VariantBench]) -> str:
    out: list[str] = []
    for r in results:
        out.append(f"{r.variant}: {r.status}{_where(r)}, {r.seconds:.1f}s" + (f" — {r.reason}" if r.reason else ""))
        if r.fix:
            out.append(f"  fix: {r.fix}")
        if r.workloads:
            rows = [("BENCHMARK", "KERNEL", "IQR", "REFERENCE", "SPEEDUP", "SAMPLES", "OUTPUT")]
            rows += [_row(w) for w in r.workloads]
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            out += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
        for w in r.workloads:
            if w.get("status") == "failed":
                out.append(f"  {w.get('benchmark')}.{w.get('workload')}: {(w.get('verify') or {}).get('detail', '')}")
            elif w.get("status") not in TIMED:
                error = w.get("error") or {}
                out.append(f"  {w.get('benchmark')}.{w.get('workload')}: {error.get('message', '')}")
                out += _detail(error.get("detail", ""))
        for p in r.problems:
            where = p.get("script", "?") + (f" ({p['benchmark']})" if p.get("benchmark") else "")
            out.append(f"  {where}: {p.get('message', '')}")
            out += _detail(p.get("detail", ""))
    return "\n".join(out)
