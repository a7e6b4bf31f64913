"""The catalogue of `check` finding codes. Codes are stable: users search them
and tests assert them. PB1xx: the file and its shape; PB2xx: values;
PB3xx: GPU architectures; PB4xx: project layout; PB5xx: platforms."""

from __future__ import annotations

from publisher.findings import Finding, Severity

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO

CODES: dict[str, tuple[Severity, str]] = {
    "PB100": (E, "build.toml cannot be read as TOML"),
    "PB101": (E, "unsupported build edition"),
    "PB102": (W, "legacy v4 build.toml (no edition), upgraded in memory"),
    "PB103": (E, "legacy build.toml (v3 or older) must be migrated"),
    "PB104": (E, "unknown key"),
    "PB105": (E, "required key missing"),
    "PB106": (E, "value has the wrong type"),
    "PB107": (E, "not exactly one framework table"),
    "PB108": (E, "not a kernel-builder build.toml (empty, or another tool's file)"),
    "PB201": (E, "invalid kernel name"),
    "PB202": (E, "invalid version"),
    "PB203": (W, "license is not a Hub license identifier"),
    "PB204": (E, "unknown backend"),
    "PB205": (W, "duplicate list entry"),
    "PB206": (E, "unknown build dependency"),
    "PB207": (E, "python dependency not in the curated list"),
    "PB208": (E, "invalid kernel dependency"),
    "PB209": (E, "invalid git URL"),
    "PB210": (E, "invalid version bound"),
    "PB211": (W, "kernel backend not in general.backends"),
    "PB212": (E, "empty value"),
    "PB213": (E, "invalid Hub repository id"),
    "PB214": (W, "build dependency unusual for the kernel backend"),
    "PB215": (W, "backend table without a matching backend"),
    "PB301": (E, "unknown CUDA capability"),
    "PB302": (E, "no CUDA capability left for a toolkit"),
    "PB303": (E, "unknown ROCm architecture"),
    "PB304": (E, "no ROCm architecture left for a toolkit"),
    "PB305": (I, "architectures per toolkit"),
    "PB306": (W, "capability built by no toolkit"),
    "PB307": (W, "CUDA kernel built by no toolkit"),
    "PB401": (E, "listed path does not exist"),
    "PB402": (E, "path leaves the project"),
    "PB403": (E, "Python package folder missing"),
    "PB404": (E, "no binding source for compiled kernels"),
    "PB405": (W, "generated file committed"),
    "PB406": (W, "no tests/ folder"),
    "PB501": (E, "publisher.toml invalid"),
    "PB502": (W, "architecture-specific compiler flag meets a platform it cannot compile for"),
}


def finding(code: str, message: str, *, field: str | None = None, hint: str | None = None,
            file: str | None = None, line: int | None = None) -> Finding:
    severity, _ = CODES[code]
    return Finding(code=code, severity=severity, message=message, file=file, line=line, hint=hint, field=field)
