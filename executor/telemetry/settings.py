"""The `OTEL_*` telemetry variables read and checked in one pass, before anything runs.

`telemetry_settings_from_env(env)` returns frozen `TelemetrySettings` or raises
`TelemetryConfigError`, one line naming the variable and its value; it imports nothing from
OpenTelemetry, so a refused value costs nothing and an unset endpoint stays silent.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from executor.redact import redact_secrets

PROTOCOLS = ("grpc", "http/protobuf", "http/json")
DEFAULT_PROTOCOL = "http/protobuf"
COMPRESSIONS = ("gzip", "deflate", "none")
DEFAULT_METRIC_EXPORT_INTERVAL_MS = 60_000
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
PROPAGATE_VARIABLE = "TRUVA_PROPAGATE_TRACE_CONTEXT"
SIGNALS = ("traces", "metrics")

# The GenAI switch: `true`/`false`, or a content-capturing mode of the Python contrib
# instrumentations (opentelemetry-util-genai `ContentCapturingMode`). This program emits no GenAI
# event records, so a mode captures content exactly when it puts content on spans.
CAPTURE_CONTENT_VALUES = {
    "true": True,
    "span_only": True,
    "span_and_event": True,
    "false": False,
    "no_content": False,
    "event_only": False,
}
_YES_NO = {"true": True, "1": True, "yes": True, "on": True,
           "false": False, "0": False, "no": False, "off": False}  # fmt: skip
_TRUE_FALSE = {"true": True, "false": False}
# An HTTP header name (RFC 9110 token).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TLS_FILES = (
    ("CERTIFICATE", "certificate_file"),
    ("CLIENT_KEY", "client_key_file"),
    ("CLIENT_CERTIFICATE", "client_certificate_file"),
)
_REFUSED = "nothing was exported"


class TelemetryConfigError(ValueError):
    """An OTEL_* variable has a value this program cannot honour (one line, names the variable)."""


@dataclass(frozen=True, slots=True)
class SignalSettings:
    """What one signal (traces or metrics) exports to, and how; `url` None: not exported."""

    signal: str
    protocol: str
    url: str | None
    switched_off_by: str | None = None
    headers: tuple[tuple[str, str], ...] | None = None
    timeout_s: float | None = None
    compression: str | None = None
    tls_files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """Every telemetry variable this program reads, checked; `disabled_by` names
    `OTEL_SDK_DISABLED` when it switched everything off (then nothing else was read)."""

    traces: SignalSettings
    metrics: SignalSettings
    disabled_by: str | None = None
    capture_content: bool = False
    propagate_trace_context: bool = True
    metric_export_interval_ms: float = DEFAULT_METRIC_EXPORT_INTERVAL_MS
    service_name: str | None = None
    resource_attributes: tuple[tuple[str, str], ...] = ()

    @property
    def exports(self) -> bool:
        """Whether any signal has somewhere to go."""
        return self.traces.url is not None or self.metrics.url is not None


def _refuse(variable: str, value: str, expected: str) -> TelemetryConfigError:
    return TelemetryConfigError(f"{variable}={value!r}: expected {expected}; {_REFUSED}")


def _choice(env: Mapping[str, str], variable: str, choices: Mapping[str, bool],
            default: bool, expected: str) -> bool:  # fmt: skip
    value = env.get(variable, "").strip()
    if not value:
        return default
    if value.lower() not in choices:
        raise _refuse(variable, env[variable], expected)
    return choices[value.lower()]


def _setting(env: Mapping[str, str], signal: str, name: str) -> tuple[str, str] | None:
    """(variable, value) of `OTEL_EXPORTER_OTLP_<SIGNAL>_<NAME>`, else of the general variable."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}", f"OTEL_EXPORTER_OTLP_{name}"):
        value = env.get(variable, "").strip()
        if value:
            return variable, value
    return None


def signal_protocol(env: Mapping[str, str], signal: str) -> str:
    """`grpc`, `http/protobuf` or `http/json` for `signal` (traces|metrics), per-signal first.

    Raises TelemetryConfigError for any other value, naming the variable and the value.
    """
    found = _setting(env, signal, "PROTOCOL")
    if found is None:
        return DEFAULT_PROTOCOL
    variable, value = found
    if value.lower() not in PROTOCOLS:
        raise _refuse(variable, value, f"one of {', '.join(PROTOCOLS)}")
    return value.lower()


def _checked_url(variable: str, value: str) -> str:
    """`value` when it is an http:// or https:// URL with a host (and a valid port)."""
    shown = redact_secrets(value)
    expected = "an http:// or https:// URL with a host, such as http://localhost:4318"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 — raises ValueError for a port that is not 0-65535
    except ValueError:
        raise _refuse(variable, shown, expected) from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise _refuse(variable, shown, expected)
    return value


def _endpoints(env: Mapping[str, str]) -> dict[str, str]:
    """Every endpoint variable that is set, checked, by name."""
    found = {}
    for variable in ("OTEL_EXPORTER_OTLP_ENDPOINT",
                     *(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT" for signal in SIGNALS)):
        value = env.get(variable, "").strip()
        if value:
            found[variable] = _checked_url(variable, value)
    return found


def _signal_url(endpoints: Mapping[str, str], signal: str, protocol: str) -> str | None:
    """The OTLP URL for `signal`: per-signal verbatim, else the base (+ `/v1/<signal>` for HTTP)."""
    specific = endpoints.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
    if specific:
        return specific
    base = endpoints.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not base:
        return None
    if protocol == "grpc":
        return base
    # The signal's path goes on the base URL's path, before a query or fragment (appended to
    # the whole text it went into `?api_key=…`, and the spans to `/`: found by an outside check).
    parts = urlsplit(base)
    return parts._replace(path=f"{parts.path.removesuffix('/')}/v1/{signal}").geturl()


def _headers(variable: str, value: str) -> tuple[tuple[str, str], ...]:
    """`key=value,key2=value2` (URL-encoded values) as (lower-case name, decoded value) pairs."""
    headers = []
    for position, item in enumerate(value.split(","), start=1):
        if not item.strip():
            continue
        name, separator, text = item.partition("=")
        name, text = unquote(name).strip().lower(), unquote(text).strip()
        if not separator or not _HEADER_NAME.fullmatch(name) or not text.isprintable():
            # The item itself is not shown: a malformed one is often a key pasted whole
            # (`x-honeycomb-team:hcaik_…`), which no pattern can tell from its name.
            raise TelemetryConfigError(
                f"{variable}: item {position} (of {len(value.split(','))} separated by commas) "
                f"is not a header: expected name=value pairs separated by commas, values "
                f"URL-encoded (a space is %20); {_REFUSED}"
            )
        headers.append((name, text))
    return tuple(headers)


def _timeout_s(variable: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise _refuse(variable, value, "a positive number of seconds, such as 10 or 2.5")
    return seconds


def _signal_settings(env: Mapping[str, str], endpoints: Mapping[str, str],
                     signal: str) -> SignalSettings:  # fmt: skip
    exporter_variable = f"OTEL_{signal.upper()}_EXPORTER"
    kind = env.get(exporter_variable, "").strip().lower() or "otlp"
    if kind not in ("otlp", "none"):
        raise _refuse(exporter_variable, env[exporter_variable], "otlp or none")
    protocol = signal_protocol(env, signal)
    headers = timeout_s = compression = None
    if (found := _setting(env, signal, "HEADERS")) is not None:
        headers = _headers(*found)
    if (found := _setting(env, signal, "TIMEOUT")) is not None:
        timeout_s = _timeout_s(*found)
    if (found := _setting(env, signal, "COMPRESSION")) is not None:
        variable, value = found
        if value.lower() not in COMPRESSIONS:
            raise _refuse(variable, value, "gzip, deflate or none")
        compression = value.lower()
    tls_files = []
    for name, option in _TLS_FILES:
        if (found := _setting(env, signal, name)) is not None:
            variable, path = found
            if not os.path.isfile(path):
                raise _refuse(variable, path, "the path of a readable PEM file")
            tls_files.append((option, path))
    off = kind == "none"
    return SignalSettings(
        signal=signal,
        protocol=protocol,
        url=None if off else _signal_url(endpoints, signal, protocol),
        switched_off_by=f"{exporter_variable}={env[exporter_variable]!r}" if off else None,
        headers=headers,
        timeout_s=timeout_s,
        compression=compression,
        tls_files=tuple(tls_files),
    )


def _metric_export_interval_ms(env: Mapping[str, str]) -> float:
    """`OTEL_METRIC_EXPORT_INTERVAL`: a positive whole number of milliseconds (unset: 60000)."""
    text = env.get("OTEL_METRIC_EXPORT_INTERVAL", "").strip()
    if not text:
        return DEFAULT_METRIC_EXPORT_INTERVAL_MS
    if not (text.isascii() and text.isdigit() and int(text) > 0):
        raise _refuse("OTEL_METRIC_EXPORT_INTERVAL", text,
                      "a positive whole number of milliseconds")  # fmt: skip
    return float(text)


def _resource_attributes(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """`OTEL_RESOURCE_ATTRIBUTES`: `key=value,…`, values URL-decoded as the SDK decodes them."""
    value = env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    attributes = []
    for item in value.split(","):
        if not item.strip():
            continue
        key, separator, text = item.partition("=")
        if not separator or not key.strip():
            raise TelemetryConfigError(
                f"OTEL_RESOURCE_ATTRIBUTES: {redact_secrets(item.strip())!r} is not an "
                f"attribute: expected key=value pairs separated by commas; {_REFUSED}"
            )
        attributes.append((key.strip(), unquote(text.strip())))
    return tuple(attributes)


def telemetry_settings_from_env(env: Mapping[str, str] = os.environ) -> TelemetrySettings:
    """Every telemetry variable of `env`, checked (the table in docs/telemetry.md).

    With `OTEL_SDK_DISABLED=true` nothing else is read. Otherwise every variable that is set is
    checked, whether or not an endpoint is set, and the first value this program cannot honour
    raises TelemetryConfigError: one line naming the variable and its value (header values and
    URL credentials shown redacted).
    """
    disabled = _choice(env, "OTEL_SDK_DISABLED", _TRUE_FALSE, False, "true or false")
    if disabled:
        off = "OTEL_SDK_DISABLED=" + repr(env["OTEL_SDK_DISABLED"])
        return TelemetrySettings(
            traces=SignalSettings("traces", DEFAULT_PROTOCOL, None, off),
            metrics=SignalSettings("metrics", DEFAULT_PROTOCOL, None, off),
            disabled_by=off,
        )
    endpoints = _endpoints(env)
    traces = _signal_settings(env, endpoints, "traces")
    metrics = _signal_settings(env, endpoints, "metrics")
    modes = ", ".join(name.upper() if "_" in name else name for name in CAPTURE_CONTENT_VALUES)
    for variable in ("OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
                     "OTEL_EXPORTER_OTLP_METRICS_INSECURE"):
        _choice(env, variable, _TRUE_FALSE, False, "true or false")  # read by the gRPC exporter
    return TelemetrySettings(
        traces=traces,
        metrics=metrics,
        capture_content=_choice(env, CAPTURE_CONTENT_VARIABLE, CAPTURE_CONTENT_VALUES, False,
                                f"one of {modes}"),
        propagate_trace_context=_choice(env, PROPAGATE_VARIABLE, _YES_NO, True,
                                        "true or false (1/0, yes/no, on/off)"),
        metric_export_interval_ms=_metric_export_interval_ms(env),
        service_name=env.get("OTEL_SERVICE_NAME", "").strip() or None,
        resource_attributes=_resource_attributes(env),
    )  # fmt: skip
