"""The OTEL_* variables read and checked before anything runs (`telemetry_settings_from_env`)."""

from __future__ import annotations

import pytest

from executor.telemetry import TelemetryConfigError, telemetry_settings_from_env

ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
SECONDS = "a positive number of seconds, such as 10 or 2.5"
URL = "an http:// or https:// URL with a host, such as http://localhost:4318"
HEADER = ("is not a header: expected name=value pairs separated by commas, values URL-encoded "
          "(a space is %20)")
CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MODES = "one of true, SPAN_ONLY, SPAN_AND_EVENT, false, NO_CONTENT, EVENT_ONLY"

# (name, variables besides the endpoint, the whole error line before "; nothing was exported")
REFUSED = [
    ("timeout_zero", {"OTEL_EXPORTER_OTLP_TIMEOUT": "0"},
     f"OTEL_EXPORTER_OTLP_TIMEOUT='0': expected {SECONDS}"),
    ("timeout_negative", {"OTEL_EXPORTER_OTLP_TIMEOUT": "-5"},
     f"OTEL_EXPORTER_OTLP_TIMEOUT='-5': expected {SECONDS}"),
    ("timeout_word", {"OTEL_EXPORTER_OTLP_TIMEOUT": "abc"},
     f"OTEL_EXPORTER_OTLP_TIMEOUT='abc': expected {SECONDS}"),
    ("timeout_infinite", {"OTEL_EXPORTER_OTLP_TIMEOUT": "inf"},
     f"OTEL_EXPORTER_OTLP_TIMEOUT='inf': expected {SECONDS}"),
    ("timeout_nan", {"OTEL_EXPORTER_OTLP_TIMEOUT": "nan"},
     f"OTEL_EXPORTER_OTLP_TIMEOUT='nan': expected {SECONDS}"),
    ("traces_timeout", {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"},
     f"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT='0': expected {SECONDS}"),
    ("metrics_timeout_beside_a_good_general_one",
     {"OTEL_EXPORTER_OTLP_TIMEOUT": "5", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "-1"},
     f"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT='-1': expected {SECONDS}"),
    ("compression", {"OTEL_EXPORTER_OTLP_COMPRESSION": "brotli"},
     "OTEL_EXPORTER_OTLP_COMPRESSION='brotli': expected gzip, deflate or none"),
    ("metrics_compression", {"OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "zstd"},
     "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION='zstd': expected gzip, deflate or none"),
    ("header_without_value", {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
     f"OTEL_EXPORTER_OTLP_HEADERS: item 1 (of 1 separated by commas) {HEADER}"),
    ("header_name_with_a_space", {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=1,x y=2"},
     f"OTEL_EXPORTER_OTLP_TRACES_HEADERS: item 2 (of 2 separated by commas) {HEADER}"),
    ("header_with_a_line_break", {"OTEL_EXPORTER_OTLP_HEADERS": "x=a%0Ab"},
     f"OTEL_EXPORTER_OTLP_HEADERS: item 1 (of 1 separated by commas) {HEADER}"),
    ("header_secret_is_redacted",
     {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization: Bearer tok-abcdefghijklmnop"},
     f"OTEL_EXPORTER_OTLP_HEADERS: item 1 (of 1 separated by commas) {HEADER}"),
    # Found by review: a key pasted with a colon was echoed (no pattern knows its name).
    ("header_pasted_with_a_colon", {"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team:hcaik_01abc"},
     f"OTEL_EXPORTER_OTLP_HEADERS: item 1 (of 1 separated by commas) {HEADER}"),
    ("capture_word", {CAPTURE: "maybe"}, f"{CAPTURE}='maybe': expected {MODES}"),
    ("capture_one", {CAPTURE: "1"}, f"{CAPTURE}='1': expected {MODES}"),
    ("endpoint_not_a_url", {"OTEL_EXPORTER_OTLP_ENDPOINT": "not-a-url"},
     f"OTEL_EXPORTER_OTLP_ENDPOINT='not-a-url': expected {URL}"),
    ("endpoint_ftp", {"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://127.0.0.1:4318"},
     f"OTEL_EXPORTER_OTLP_ENDPOINT='ftp://127.0.0.1:4318': expected {URL}"),
    ("endpoint_without_host", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://:4318"},
     f"OTEL_EXPORTER_OTLP_ENDPOINT='http://:4318': expected {URL}"),
    ("endpoint_bad_port", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:99999"},
     f"OTEL_EXPORTER_OTLP_ENDPOINT='http://localhost:99999': expected {URL}"),
    ("traces_endpoint", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "localhost:4318/v1/traces"},
     f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT='localhost:4318/v1/traces': expected {URL}"),
    ("metrics_endpoint_of_a_switched_off_signal",
     {"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "ftp://x"},
     f"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT='ftp://x': expected {URL}"),
    ("certificate_missing", {"OTEL_EXPORTER_OTLP_CERTIFICATE": "/no/such/ca.pem"},
     "OTEL_EXPORTER_OTLP_CERTIFICATE='/no/such/ca.pem': expected the path of a readable PEM "
     "file"),
    ("insecure_word", {"OTEL_EXPORTER_OTLP_INSECURE": "yes"},
     "OTEL_EXPORTER_OTLP_INSECURE='yes': expected true or false"),
    ("sdk_disabled_word", {"OTEL_SDK_DISABLED": "1"},
     "OTEL_SDK_DISABLED='1': expected true or false"),
    ("propagate_word", {"TRUVA_PROPAGATE_TRACE_CONTEXT": "maybe"},
     "TRUVA_PROPAGATE_TRACE_CONTEXT='maybe': expected true or false (1/0, yes/no, on/off)"),
    ("resource_attribute_without_value", {"OTEL_RESOURCE_ATTRIBUTES": "team=a,oops"},
     "OTEL_RESOURCE_ATTRIBUTES: 'oops' is not an attribute: expected key=value pairs "
     "separated by commas"),
    ("traces_exporter", {"OTEL_TRACES_EXPORTER": "jaeger"},
     "OTEL_TRACES_EXPORTER='jaeger': expected otlp or none"),
    ("protocol", {"OTEL_EXPORTER_OTLP_PROTOCOL": "grcp"},
     "OTEL_EXPORTER_OTLP_PROTOCOL='grcp': expected one of grpc, http/protobuf, http/json"),
    ("metric_export_interval", {"OTEL_METRIC_EXPORT_INTERVAL": "0"},
     "OTEL_METRIC_EXPORT_INTERVAL='0': expected a positive whole number of milliseconds"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "variables", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_value_that_cannot_be_honoured_is_one_line_naming_the_variable(
    name, variables, message
):
    with pytest.raises(TelemetryConfigError) as raised:
        telemetry_settings_from_env({**ENDPOINT, **variables})
    assert str(raised.value) == f"{message}; nothing was exported"


@pytest.mark.parametrize(("name", "variables", "message"), REFUSED, ids=[c[0] for c in REFUSED])
def test_values_are_checked_without_an_endpoint_too(name, variables, message):
    with pytest.raises(TelemetryConfigError):
        telemetry_settings_from_env(variables)


# (name, value, content captured): `true`/`false` and opentelemetry-util-genai's modes; this
# program emits no GenAI event records, so a mode captures exactly what it puts on spans.
CAPTURE_VALUES = [
    ("unset", None, False),
    ("true", "true", True),
    ("true_any_case", "True", True),
    ("span_only", "SPAN_ONLY", True),
    ("span_and_event", "SPAN_AND_EVENT", True),
    ("span_only_lower_case", "span_only", True),
    ("false", "false", False),
    ("no_content", "NO_CONTENT", False),
    ("event_only", "EVENT_ONLY", False),
]


@pytest.mark.parametrize(("name", "value", "captured"), CAPTURE_VALUES,
                         ids=[c[0] for c in CAPTURE_VALUES])  # fmt: skip
def test_content_capture_values(name, value, captured):
    env = {**ENDPOINT, **({CAPTURE: value} if value is not None else {})}
    assert telemetry_settings_from_env(env).capture_content is captured


def test_good_values_are_read_once_per_signal_per_signal_first(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    settings = telemetry_settings_from_env({
        **ENDPOINT,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5",
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "7",
        "OTEL_EXPORTER_OTLP_COMPRESSION": "GZIP",
        "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc, x-team = blue ,",
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(ca),
        "OTEL_RESOURCE_ATTRIBUTES": "team=a%20b,region=eu",
        "TRUVA_PROPAGATE_TRACE_CONTEXT": "off",
    })  # fmt: skip
    traces, metrics = settings.traces, settings.metrics
    assert (traces.url, metrics.url) == ("http://127.0.0.1:4318/v1/traces",
                                         "http://127.0.0.1:4318/v1/metrics")
    assert (traces.timeout_s, metrics.timeout_s) == (2.5, 7.0)
    assert traces.compression == metrics.compression == "gzip"
    assert traces.headers == (("authorization", "Bearer abc"), ("x-team", "blue"))
    assert traces.tls_files == (("certificate_file", str(ca)),) and metrics.tls_files == ()
    assert settings.resource_attributes == (("team", "a b"), ("region", "eu"))
    assert settings.propagate_trace_context is False


SWITCHED_OFF = [
    ("traces_exporter_none", {**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"},
     "OTEL_TRACES_EXPORTER='none'"),
    ("sdk_disabled", {**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, "OTEL_SDK_DISABLED='TRUE'"),
    ("no_endpoint", {}, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "env", "switched_off_by"), SWITCHED_OFF,
                         ids=[c[0] for c in SWITCHED_OFF])  # fmt: skip
def test_a_signal_switched_off_names_the_variable_that_did_it(name, env, switched_off_by):
    traces = telemetry_settings_from_env(env).traces
    assert traces.url is None
    assert traces.switched_off_by == switched_off_by


def test_sdk_disabled_reads_nothing_else():
    settings = telemetry_settings_from_env({**ENDPOINT, "OTEL_SDK_DISABLED": "true",
                                            "OTEL_EXPORTER_OTLP_TIMEOUT": "0"})  # fmt: skip
    assert settings.disabled_by == "OTEL_SDK_DISABLED='true'" and not settings.exports


@pytest.mark.parametrize(
    ("base", "traces"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/otlp", "http://127.0.0.1:4318/otlp/v1/traces"),
        # found by an outside check: the path was appended after the query
        ("http://127.0.0.1:4318/otlp?api_key=k", "http://127.0.0.1:4318/otlp/v1/traces?api_key=k"),
    ],
    ids=["bare", "slash", "path", "query"],
)
def test_the_signal_path_goes_on_the_base_urls_path(base: str, traces: str) -> None:
    settings = telemetry_settings_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": base})
    assert settings.traces.url == traces
