"""OpenTelemetry spans, through the API only: when `opentelemetry-api` is not installed every call is a no-op.

Span names and attributes (the `edinbox.` namespace):

- `edinbox settle`: one per settled delivery, with `edinbox.key` (source/message_id), `edinbox.consumer`,
  `edinbox.outcome`, `edinbox.attempt` and, from the hub, `edinbox.partner` and `edinbox.message_type`;
- its children `edinbox handler` (the user's handler, or the hub's accounting sink) and `edinbox commit`.

A producer's trace context travels in the message headers (W3C `traceparent`); `extract(headers)` continues it,
and `inject(headers)` adds the current one to a message the outbox stores (`tx.publish`), so the relay carries the
publishing transaction's trace to the next consumer.
The application installs the SDK and its exporter; the library only asks the global tracer provider. Until the
application sets one, every span would be a non-recording one: `span` and `note` then do nothing at all (the API's
own no-op spans still cost about 100 us per delivery, as much as a third of the inbox's client time).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any

_otel: Any = None
_context: Any = None
_propagate: Any = None
_TRACEPARENT: Any = None
_SILENT: tuple[type, ...] = ()  # the API's providers that record nothing
with contextlib.suppress(ImportError):  # the `otel` extra is optional: without it spans are no-ops
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _otel
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _TRACEPARENT = TraceContextTextMapPropagator()  # the stored traceparent's own format, whatever the global one
    _SILENT = (_otel.ProxyTracerProvider, _otel.NoOpTracerProvider)

__all__ = ["SETTLE", "attached", "extract", "inject", "link", "note", "span", "start", "traceparent", "tracing"]

SETTLE = "edinbox settle"
HANDLER = "edinbox handler"
COMMIT = "edinbox commit"

_SCOPE = "edinbox"


_NOTHING = contextlib.nullcontext()
_NAMED = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ  # a provider named by the environment: the API loads it


def tracing() -> bool:
    """True when spans are recorded: the OpenTelemetry API is installed and the application set a tracer provider
    (an SDK's; the API's default proxy and its no-op provider record nothing). Checked on each call: the provider
    may be set after edinbox is imported."""
    if _otel is None:
        return False
    # get_tracer_provider() looks the environment up on every call (about 5 us, paid several times per delivery);
    # the provider the application set is the API's `_TRACER_PROVIDER` (the test of the spans fails if that moves)
    provider = _otel.get_tracer_provider() if _NAMED else getattr(_otel, "_TRACER_PROVIDER", None)
    return provider is not None and not isinstance(provider, _SILENT)


def span(name: str, attributes: Mapping[str, Any] | None = None) -> AbstractContextManager[Any]:
    """A span, current inside the block; its exception is recorded on it. Yields None when nothing is traced."""
    if not tracing():
        return _NOTHING
    started: AbstractContextManager[Any] = _otel.get_tracer(_SCOPE).start_as_current_span(
        name, attributes=dict(attributes or {})
    )
    return started


def note(target: Any = None, /, **attributes: Any) -> None:
    """Set `edinbox.<name>` attributes on `target`, or on the current span (nothing when nothing is traced)."""
    if not tracing():
        return
    current = target if target is not None else _otel.get_current_span()
    for name, value in attributes.items():
        if value is not None:
            current.set_attribute(f"edinbox.{name}", value)


def extract(headers: Mapping[str, str] | None) -> Any:
    """The producer's trace context carried in message headers (`traceparent`), or None when there is none."""
    if _otel is None or not headers:
        return None
    found = _propagate.extract(dict(headers))
    return found if _otel.get_current_span(found).get_span_context().is_valid else None


def inject(headers: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """`headers` with the current trace context added (W3C `traceparent`, `tracestate` when set), for a message
    published now: its consumer continues this trace. Unchanged when nothing is traced or a traceparent is there."""
    if not tracing() or not _otel.get_current_span().get_span_context().is_valid:
        return headers
    if headers and any(name.lower() == "traceparent" for name in headers):
        return headers
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return {**(headers or {}), **carrier} if carrier else headers


def traceparent(of: Any = None) -> str | None:
    """The W3C traceparent of the span `of` (default: the current span), what the journal keeps of the attempt that
    settles a message; None when nothing is traced."""
    if not tracing():
        return None
    carrier: dict[str, str] = {}
    context = None if of is None else _otel.set_span_in_context(of)
    _TRACEPARENT.inject(carrier, context=context)  # nothing when the span is not a valid one
    return carrier.get("traceparent")


def link(stored: str | None, *, on: Any = None) -> None:
    """Link the span `on` (default: the current span) to the span a stored traceparent names (a suppressed duplicate
    to the attempt that made the effect); nothing when nothing is traced or `stored` is not a valid traceparent."""
    if not stored or not tracing():
        return
    target = _otel.get_current_span(_TRACEPARENT.extract({"traceparent": stored})).get_span_context()
    if target.is_valid:
        (on if on is not None else _otel.get_current_span()).add_link(target)


@contextlib.contextmanager
def attached(parent: Any) -> Iterator[None]:
    """Make `parent` (a context from `extract`, or a span) the current context inside the block; None changes
    nothing."""
    if _otel is None or parent is None:
        yield
        return
    if not isinstance(parent, _context.Context):
        parent = _otel.set_span_in_context(parent)
    token = _context.attach(parent)
    try:
        yield
    finally:
        _context.detach(token)


def start(
    name: str, *, parent: Any = None, start_time: int | None = None, attributes: Mapping[str, Any] | None = None
) -> Any:
    """A span that is not made current, under the context `parent` (or a span): ended by the caller with
    `.end(end_time=...)`; None without OpenTelemetry. Times are nanoseconds since the epoch."""
    if _otel is None:
        return None
    if parent is not None and not isinstance(parent, _context.Context):
        parent = _otel.set_span_in_context(parent)
    return _otel.get_tracer(_SCOPE).start_span(
        name, context=parent, start_time=start_time, attributes=dict(attributes or {})
    )
