"""The demo tools: travel, stocks, currency, weather and payments, with fixed, documented failures.

Each tool answers `POST /capabilities/<capability>` with the TruvaG3 envelope
`{"success": bool, "data"?: ..., "error"?: {code, message, category, retryable?, details?}}`
and `GET /` with a description of itself. Behaviour is deterministic: a capability that fails
"the first time" counts calls per execution (the `X-TruvaG3-Request-ID` header), path and
parameters, so every run of a demo plan sees the same story; `stocks.history` holds its answer
until the demo runner releases it, so a run can be cancelled with the request in flight.
docs/demo.md lists every rule.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from console.demo.server import DemoRequest, DemoResponse

EXECUTION_HEADER = "x-truvag3-request-id"
API_KEY_HEADER = "x-api-key"
VALID_FLIGHTS_API_KEY = "demo-valid-key"
_OMITTED: Any = object()


def ok(data: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> DemoResponse:
    """A success envelope."""
    return DemoResponse(status, {"success": True, "data": data}, dict(headers or {}))


def tool_error(
    status: int,
    code: str,
    message: str,
    category: str,
    *,
    retryable: Any = _OMITTED,
    details: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> DemoResponse:
    """An error envelope; `retryable` is left out of the JSON unless given."""
    error: dict[str, Any] = {"code": code, "message": message, "category": category}
    if retryable is not _OMITTED:
        error["retryable"] = retryable
    if details:
        error["details"] = dict(details)
    return DemoResponse(status, {"success": False, "error": error}, dict(headers or {}))


@dataclass(frozen=True, slots=True)
class Call:
    """One capability call: its parameters, headers, and how many times this exact call was
    made in this execution (1 for the first)."""

    parameters: dict[str, Any]
    headers: dict[str, str]
    call_number: int


Capability = Callable[[Call], DemoResponse]


class DemoTool:
    """One tool: capabilities by name, served under `/capabilities/<name>`."""

    def __init__(self, name: str, description: str, capabilities: Mapping[str, Capability]) -> None:
        self.name = name
        self.description = description
        self.capabilities = dict(capabilities)
        self._lock = threading.Lock()
        self._calls: Counter[tuple[str, str, str]] = Counter()

    def handle(self, request: DemoRequest) -> DemoResponse:
        """Route one HTTP request to its capability."""
        if request.path in ("/", "/health"):
            return ok(
                {
                    "tool": self.name,
                    "description": self.description,
                    "capabilities": [f"/capabilities/{c}" for c in self.capabilities],
                }
            )
        prefix = "/capabilities/"
        name = request.path.removeprefix(prefix) if request.path.startswith(prefix) else None
        if name not in self.capabilities:
            known = ", ".join(self.capabilities)
            return tool_error(
                404,
                "UNKNOWN_CAPABILITY",
                f"{self.name} has no capability at {request.path} (known: {known})",
                "NOT_FOUND",
                retryable=False,
            )
        if request.method != "POST":
            return tool_error(
                405,
                "METHOD_NOT_ALLOWED",
                f"{request.path} takes POST, got {request.method}",
                "INPUT_ERROR",
                retryable=False,
                headers={"Allow": "POST"},
            )
        if not isinstance(request.json, dict):
            return tool_error(
                400,
                "INVALID_REQUEST",
                "request body must be a JSON object",
                "INPUT_ERROR",
                retryable=False,
            )
        key = (
            request.headers.get(EXECUTION_HEADER, ""),
            request.path,
            json.dumps(request.json, sort_keys=True, separators=(",", ":")),
        )
        with self._lock:
            self._calls[key] += 1
            call_number = self._calls[key]
        call = Call(parameters=request.json, headers=request.headers, call_number=call_number)
        return self.capabilities[name](call)


def _text(call: Call, key: str) -> str | None:
    value = call.parameters.get(key)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _missing(key: str) -> DemoResponse:
    return tool_error(
        400,
        "MISSING_FIELD",
        f"{key} is required",
        "INPUT_ERROR",
        retryable=True,
        details={"field": key},
    )


# ------------------------------------------------------------------------------------- travel

HOTELS: dict[str, list[dict[str, Any]]] = {
    "PAR": [{"id": "HPAR-001", "name": "Hôtel Lumière", "price": 189.0, "currency": "EUR"},
            {"id": "HPAR-002", "name": "Le Petit Canal", "price": 142.5, "currency": "EUR"}],
    "TYO": [{"id": "HTYO-001", "name": "Shinjuku Garden Hotel", "price": 21500,
             "currency": "JPY"},
            {"id": "HTYO-002", "name": "Asakusa River Inn", "price": 16800, "currency": "JPY"}],
    "LON": [{"id": "HLON-001", "name": "The Fog & Lantern", "price": 210.0, "currency": "GBP"}],
    "NYC": [{"id": "HNYC-001", "name": "Hudson Yard Rooms", "price": 265.0, "currency": "USD"}],
}  # fmt: skip


def search_hotels(call: Call) -> DemoResponse:
    """Hotels by IATA city code; anything else is a correctable 400 INVALID_CITY (scenario A)."""
    city_code = _text(call, "city_code")
    if city_code is None:
        return _missing("city_code")
    if city_code not in HOTELS:
        return tool_error(
            400, "INVALID_CITY", f"INVALID CITY CODE: {city_code}", "INPUT_ERROR", retryable=True,
            details={"field": "city_code",
                     "hint": "Use a 3-letter IATA city code, e.g. PAR for Paris, TYO for Tokyo"},
        )  # fmt: skip
    nights = call.parameters.get("nights", 1)
    nights = nights if isinstance(nights, int) and not isinstance(nights, bool) else 1
    hotels = [{**hotel, "total": round(hotel["price"] * nights, 2)} for hotel in HOTELS[city_code]]
    return ok(
        {
            "city_code": city_code,
            "check_in": call.parameters.get("check_in"),
            "nights": nights,
            "hotels": hotels,
        }
    )


def plan_trip(call: Call) -> DemoResponse:
    """A delegated trip-planner agent (an orchestrator capability) that always times out: 504.

    It says `retryable: true`, yet an orchestrator gets one physical dispatch, ever.
    """
    destination = _text(call, "destination")
    if destination is None:
        return _missing("destination")
    return tool_error(
        504,
        "AGENT_TIMEOUT",
        f"the trip-planner agent did not finish planning {destination} within 30 s; "
        "it may already have booked some legs",
        "TIMEOUT",
        retryable=True,
    )


def search_flights(call: Call) -> DemoResponse:
    """Flights; the upstream rejects any API key but `demo-valid-key` with a 401 (scenario C).

    The 401 leaves `retryable` out, so the status rule decides (terminal.auth_or_method).
    """
    api_key = call.headers.get(API_KEY_HEADER)
    if api_key != VALID_FLIGHTS_API_KEY:
        return tool_error(
            401,
            "AUTH_ERROR",
            "upstream rejected the API key: error 401: invalid API key",
            "AUTH_ERROR",
        )
    origin, destination = _text(call, "origin"), _text(call, "destination")
    if origin is None:
        return _missing("origin")
    if destination is None:
        return _missing("destination")
    return ok(
        {
            "flights": [
                {
                    "flight": "TV 101",
                    "origin": origin,
                    "destination": destination,
                    "date": call.parameters.get("date"),
                    "price": 312.0,
                    "currency": "EUR",
                }
            ]
        }
    )


# ------------------------------------------------------------------------------------- stocks

PRICES = {"TSLA": 468.285, "AAPL": 227.52, "MSFT": 415.3, "NVDA": 181.07}


def quote(call: Call) -> DemoResponse:
    """A stock quote; the first call of each execution is rate limited (429, Retry-After: 1)."""
    if call.call_number == 1:
        return tool_error(
            429,
            "RATE_LIMIT",
            "error 429: rate limit exceeded",
            "RATE_LIMIT",
            retryable=True,
            details={"limit": "1 request per second per symbol"},
            headers={"Retry-After": "1"},
        )
    symbol = _text(call, "symbol")
    if symbol is None:
        return _missing("symbol")
    if symbol not in PRICES:
        return tool_error(
            404,
            "SYMBOL_NOT_FOUND",
            f"unknown ticker symbol {symbol!r}",
            "NOT_FOUND",
            retryable=True,
            details={"field": "symbol", "hint": "Use an upper-case ticker, e.g. TSLA"},
        )
    return ok(
        {
            "symbol": symbol,
            "price": PRICES[symbol],
            "currency": "USD",
            "as_of": "2026-01-02T15:30:00Z",
        }
    )


REPORT_HOLD_S = 10.0


class SlowReports:
    """`stocks.history`: a slow report whose answer waits until the demo runner releases it.

    A request is held until `release(execution_id)`, or REPORT_HOLD_S seconds when nobody
    releases it (a run by hand against `demo serve`: press Ctrl-C within that time). The
    callback given to `on_arrival` runs when that execution's request arrives, which is how
    `demo record` cancels the run with the request in flight, every time at the same point.
    """

    def __init__(self, hold_s: float = REPORT_HOLD_S) -> None:
        self.hold_s = hold_s
        self._condition = threading.Condition()
        self._released: set[str] = set()
        self._closed = False
        self._on_arrival: dict[str, Callable[[], None]] = {}

    def on_arrival(self, execution_id: str, callback: Callable[[], None]) -> None:
        """Run `callback` (on a server thread) when `execution_id`'s report request arrives."""
        with self._condition:
            self._on_arrival[execution_id] = callback

    def release(self, execution_id: str) -> None:
        """Let `execution_id`'s held request answer."""
        with self._condition:
            self._released.add(execution_id)
            self._on_arrival.pop(execution_id, None)
            self._condition.notify_all()

    def close(self) -> None:
        """Release every held request (the servers are stopping)."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def history(self, call: Call) -> DemoResponse:
        """Daily closing prices for a symbol, after the hold."""
        symbol = _text(call, "symbol")
        if symbol is None:
            return _missing("symbol")
        execution_id = call.headers.get(EXECUTION_HEADER, "")
        with self._condition:
            callback = self._on_arrival.pop(execution_id, None)
        if callback is not None:
            callback()
        with self._condition:
            self._condition.wait_for(
                lambda: self._closed or execution_id in self._released, timeout=self.hold_s
            )
        price = PRICES.get(symbol, 100.0)
        return ok(
            {
                "symbol": symbol,
                "period": call.parameters.get("period"),
                "closes": [round(price * (1 + (day % 5 - 2) / 100), 3) for day in range(5)],
            }
        )


# ----------------------------------------------------------------------------------- currency

RATES_PER_USD = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 149.5, "CHF": 0.88}


def convert(call: Call) -> DemoResponse:
    """Currency conversion at fixed rates; amount 0 is a correctable 400 (the Tesla story)."""
    if "amount" not in call.parameters:
        return _missing("amount")
    amount = call.parameters["amount"]
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return tool_error(
            400,
            "INVALID_AMOUNT",
            "amount must be a number",
            "INPUT_ERROR",
            retryable=True,
            details={"field": "amount"},
        )
    if amount <= 0:
        return tool_error(
            400,
            "INVALID_AMOUNT",
            "amount must be greater than 0",
            "INPUT_ERROR",
            retryable=True,
            details={"field": "amount", "received": str(amount)},
        )
    supported = ", ".join(sorted(RATES_PER_USD))
    for key in ("from", "to"):
        code = _text(call, key)
        if code is None:
            return _missing(key)
        if code not in RATES_PER_USD:
            return tool_error(
                400,
                "UNSUPPORTED_CURRENCY",
                f"unsupported currency {code!r}",
                "INPUT_ERROR",
                retryable=True,
                details={"field": key, "supported": supported},
            )
    source, target = call.parameters["from"].strip(), call.parameters["to"].strip()
    rate = RATES_PER_USD[target] / RATES_PER_USD[source]
    return ok(
        {
            "amount": amount,
            "from": source,
            "to": target,
            "rate": round(rate, 6),
            "converted": round(amount * rate, 2),
        }
    )


# ------------------------------------------------------------------------------------ weather

# location (case-folded) -> display name, °C, condition, nearest IATA city code
WEATHER: dict[str, tuple[str, float, str, str]] = {
    "london": ("London", 11.2, "overcast", "LON"),
    "london, uk": ("London", 11.2, "overcast", "LON"),
    "paris": ("Paris", 14.8, "light rain", "PAR"),
    "paris, france": ("Paris", 14.8, "light rain", "PAR"),
    "tokyo": ("Tokyo", 18.4, "clear sky", "TYO"),
    "tokyo, japan": ("Tokyo", 18.4, "clear sky", "TYO"),
    "new york, us": ("New York", 9.6, "windy", "NYC"),
    "flower mound, texas, us": ("Flower Mound", 25.3, "clear sky", "DFW"),
    "flaky": ("Flaky test station", 12.0, "fog", "LON"),
}
FLAKY_FAILURES = 2


def _weather_data(location: str, units: Any) -> dict[str, Any]:
    name, celsius, condition, nearest = WEATHER[location.casefold()]
    imperial = units == "imperial"
    return {"location": name, "temperature": round(celsius * 9 / 5 + 32, 1) if imperial
            else celsius, "units": "imperial" if imperial else "metric", "condition": condition,
            "nearest_city_code": nearest, "source": "truva demo weather"}  # fmt: skip


def current(call: Call) -> DemoResponse:
    """Current weather; `flaky` fails twice with 503, `outage` always fails with 503
    retryable:true, `maintenance` is 503 retryable:false, an unknown location is a correctable
    404 LOCATION_NOT_FOUND (the Flower Mound story)."""
    location = _text(call, "location")
    if location is None:
        return _missing("location")
    folded = location.casefold()
    if folded == "maintenance":
        return tool_error(
            503,
            "MAINTENANCE",
            "weather station offline for scheduled maintenance until 18:00 UTC",
            "SERVICE_ERROR",
            retryable=False,
        )
    if folded == "outage":
        return tool_error(
            503,
            "UPSTREAM_OUTAGE",
            "weather upstream is down (incident WX-4711); try again later",
            "SERVICE_ERROR",
            retryable=True,
        )
    if folded == "flaky" and call.call_number <= FLAKY_FAILURES:
        return tool_error(
            503,
            "SERVICE_UNAVAILABLE",
            "weather upstream temporarily unavailable",
            "SERVICE_ERROR",
            retryable=True,
        )
    if folded not in WEATHER:
        return tool_error(
            404, "LOCATION_NOT_FOUND", f"Location '{location}' not found in weather database",
            "NOT_FOUND", retryable=True,
            details={"original_location": location,
                     "hint": "Try 'City, Country' format (e.g., 'London, UK')"},
        )  # fmt: skip
    return ok(_weather_data(location, call.parameters.get("units")))


def current_v1(call: Call) -> DemoResponse:
    """The legacy v1 endpoint: reports a failed lookup as 503 (scenario D's misclassification)."""
    location = _text(call, "location")
    if location is None:
        return _missing("location")
    if location.casefold() not in WEATHER:
        return tool_error(503, "UPSTREAM_ERROR", f"location not found: {location}", "SERVICE_ERROR")
    return ok(_weather_data(location, call.parameters.get("units")))


# ----------------------------------------------------------------------------------- payments


class PaymentsBackend:
    """Remembers the charges it forwarded, so `status` can answer after a lost response."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._charges: dict[str, dict[str, Any]] = {}

    def charge(self, call: Call) -> DemoResponse:
        """Forwards the charge, then the gateway times out: 502 (an unsafe side effect)."""
        reference = _text(call, "reference")
        if reference is None:
            return _missing("reference")
        with self._lock:
            self._charges[reference] = {
                "reference": reference,
                "state": "captured",
                "amount": call.parameters.get("amount"),
                "currency": call.parameters.get("currency"),
            }
        return tool_error(
            502,
            "GATEWAY_TIMEOUT",
            "payment gateway timed out after forwarding the charge; it may have been captured",
            "SERVICE_ERROR",
            retryable=True,
        )

    def status(self, call: Call) -> DemoResponse:
        """Looks up a charge by reference: what to do after an unsafe call's lost response."""
        reference = _text(call, "reference")
        if reference is None:
            return _missing("reference")
        with self._lock:
            found = self._charges.get(reference)
        if found is None:
            return tool_error(
                404,
                "CHARGE_NOT_FOUND",
                f"no charge with reference {reference!r}",
                "NOT_FOUND",
                retryable=False,
            )
        return ok(dict(found))


# -------------------------------------------------------------------------------------- tools



def build_tools(reports: SlowReports | None = None) -> dict[str, DemoTool]:
    """Fresh instances of every demo tool (fresh call counters), by name.

    `reports` serves `stocks.history`; by default a new `SlowReports`.
    """
    payments = PaymentsBackend()
    reports = reports if reports is not None else SlowReports()
    return {
        "travel": DemoTool("travel", "hotel and flight search (an Amadeus-like upstream)",
                           {"search_hotels": search_hotels, "search_flights": search_flights,
                            "plan_trip": plan_trip}),
        "stocks": DemoTool("stocks", "stock quotes behind a strict rate limit",
                           {"quote": quote, "history": reports.history}),
        "currency": DemoTool("currency", "currency conversion at fixed demo rates",
                             {"convert": convert}),
        "weather": DemoTool("weather", "current weather, plus a legacy v1 endpoint",
                            {"current": current, "current_v1": current_v1}),
        "payments": DemoTool("payments", "card charges through a gateway that times out",
                             {"charge": payments.charge, "status": payments.status}),
    }  # fmt: skip
