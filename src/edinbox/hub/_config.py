"""The hub's configuration: one typed model (pydantic-settings) for the TOML file, `EDINBOX_` variables and flags.

Each field of `HubConfig` is a key of `[hub]` in the TOML file, a flag of the commands that take it and an
`EDINBOX_<FIELD>` variable; its type and description are written once, here. `edinbox config --example` prints the
file this model describes (`example_toml()`), so the documentation cannot drift from it. Loading a file and merging
the variables and flags is `edinbox.hub._settings`. A value of the wrong type is a ConfigurationError naming the key
and the type expected; a duration needs its unit (`30s`, `15m`, `12h`, `7d`, `2w`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from edinbox._core import parse_table
from edinbox._errors import ConfigurationError

__all__ = [
    "DEFAULT_ROUTES",
    "MAX_PAYLOAD",
    "PURGE_MAX_RATE",
    "Agreement",
    "HubConfig",
    "describe",
    "parse_duration",
    "parse_size",
]

INBOX = "inbox"
BYPASS = "bypass"

MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: a delivery bigger than this is parked with its reason, never parsed."""

PURGE_MAX_RATE = 10000.0
"""The default `purge_max_rate`: rows per second that keep `process()`'s p99 within 1.5x during a purge
(bench/purge.py, docs/scaling.md)."""

DEFAULT_ROUTES: Mapping[str, str] = MappingProxyType(
    {
        "INVOIC": INBOX,
        "810": INBOX,
        # acknowledgments are naturally idempotent: a second copy changes nothing
        "997": BYPASS,
        "999": BYPASS,
        "TA1": BYPASS,
        "CONTRL": BYPASS,
        "APERAK": BYPASS,
    }
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_HINT = "a duration with its unit (30s, 15m, 12h, 7d, 2w)"


def parse_duration(text: str) -> timedelta:
    """Parse `30s`, `15m`, `12h`, `7d` or `2w` into a timedelta; a number without its unit is refused."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if not match:
        raise ConfigurationError(f"{text!r} is not {_DURATION_HINT}")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


def give_up_after(config: HubConfig) -> timedelta | None:
    """How long the hub waits out one outage before it gives up (None: for ever)."""
    return parse_duration(config.give_up_after) if config.give_up_after else None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgt])(i?))?b?\s*$", re.IGNORECASE)


def parse_size(value: object) -> int:
    """Parse a number of bytes, or a size such as `100KB`, `32MiB`, `1.5GB` (KiB, MiB, GiB: powers of 1024)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(value) if isinstance(value, str) else None
    if not match:
        raise ConfigurationError(f"max_payload {value!r} is not a size (examples: 65536, 100KB, 32MiB, 1GiB)")
    number, prefix, binary = match.groups()
    power = "kmgt".index(prefix.lower()) + 1 if prefix else 0
    return int(float(number) * (1024 if binary else 1000) ** power)


def _whole(value: object) -> object:
    """An integer, or its digits as text (a variable or flag); 2.5, "twenty" and true are refused."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"expected a whole number, got {value!r}")


def _seconds(value: object) -> object:
    """A number of seconds (integer or decimal, or its text); a duration text is refused here."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ValueError(f"expected a number of seconds, got {value!r}")


def _duration(value: object) -> object:
    """A duration text with its unit, kept as written (`7d`)."""
    if isinstance(value, str) and _DURATION.match(value):
        return value.strip()
    raise ValueError(f"expected {_DURATION_HINT}, got {value!r}")


def _optional_duration(value: object) -> object:
    """A duration, or empty for "never"."""
    return "" if value in ("", None) else _duration(value)


def _rate(value: object) -> object:
    """A positive number of rows per second (integer or decimal, or its text; `inf`: no limit); 0, a negative
    number, NaN and words are refused."""
    rate = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        rate = float(value)
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            rate = float(value)
    if rate is None or not rate > 0:
        raise ValueError(f"expected a positive number of rows per second (inf: no limit), got {value!r}")
    return rate


def _period(value: object) -> object:
    """A duration longer than zero, or empty for "never"."""
    if value in ("", None):
        return ""
    text = _duration(value)
    if parse_duration(str(text)) <= timedelta(0):
        raise ValueError(f"expected a duration longer than zero (or empty: never), got {value!r}")
    return text


def _size(value: object) -> object:
    """A number of bytes or a size text."""
    try:
        size = parse_size(value)
    except ConfigurationError:
        raise ValueError(f"expected a size (65536, 100KB, 32MiB, 1GiB), got {value!r}") from None
    if size < 1:
        raise ValueError("must be at least 1 byte")
    return size


def _text(value: object) -> object:
    """Text only: a number where a URL or name belongs is a mistake, not something to convert."""
    if isinstance(value, str):
        return value
    raise ValueError(f"expected text, got {value!r}")


def _name(value: object) -> object:
    """Non-empty text."""
    if isinstance(value, str) and value.strip():
        return value
    raise ValueError(f"expected a non-empty name, got {value!r}")


def _routes(value: object) -> object:
    """Routes by upper-case message type over the defaults."""
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table of TYPE = "inbox" | "bypass", got {value!r}')
    routes = {**DEFAULT_ROUTES, **{str(k).upper(): v for k, v in value.items()}}
    for kind, route in routes.items():
        if route not in (INBOX, BYPASS):
            raise ValueError(f"{kind}: expected 'inbox' or 'bypass', got {route!r}")
    return routes


ACKNOWLEDGMENTS = ("997", "999", "none")
TA1 = ("requested", "always", "never")
DUPLICATES = ("notify", "silent")


@dataclass(frozen=True, slots=True)
class Agreement:
    """What a trading partner gets back (`[partners."QUALIFIER:ID"]`): the defaults are those of a partner
    without an agreement.

    `outbound` is where its acknowledgments go (any source URL; `{id}` is replaced by the partner's id); with none
    (the default, unless `[partners."*"]` sets one) nothing is sent. `acknowledgment`: the X12 functional
    acknowledgment, "997", "999" (005010 partners) or "none". `ta1`: "requested" (ISA14 / UNB 0031 = 1), "always" or
    "never"; for EDIFACT partners it governs CONTRL, which `acknowledgment = "none"` turns off too. `duplicates`: a
    re-sent interchange gets a notice (TA1 R 025 / CONTRL UCI 4 26) with "notify", nothing with "silent". `sender`:
    our party "QUALIFIER:ID" in its acknowledgments (empty: the receiver the partner addressed). An interchange of
    acknowledgments only is never answered.
    """

    outbound: str = ""
    acknowledgment: str = "997"
    ta1: str = "requested"
    duplicates: str = "notify"
    sender: str = ""

    def __post_init__(self) -> None:
        """Refuse values that cannot work, with a sentence saying which."""
        for name, allowed in (("acknowledgment", ACKNOWLEDGMENTS), ("ta1", TA1), ("duplicates", DUPLICATES)):
            if getattr(self, name) not in allowed:
                raise ConfigurationError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.outbound and "://" not in self.outbound:
            raise ConfigurationError(f"outbound must be a URL (dir://, amqp://, ...), not {self.outbound!r}")
        if self.sender and ":" not in self.sender:
            raise ConfigurationError(f"sender must be QUALIFIER:ID (e.g. ZZ:HUB), not {self.sender!r}")


_NO_AGREEMENT = Agreement()


def _partners(value: object) -> object:
    """Agreements by partner: a table of tables (`[partners."ZZ:ACME"]`), each checked as an Agreement."""
    if not isinstance(value, Mapping):
        raise ValueError(f'expected tables [partners."QUALIFIER:ID"], got {value!r}')
    agreements = {}
    for name, terms in value.items():
        if isinstance(terms, Agreement):
            agreements[str(name)] = terms
            continue
        if not isinstance(terms, Mapping):
            raise ValueError(f"{name}: expected a table of outbound, acknowledgment, ta1, duplicates, sender")
        try:
            agreements[str(name)] = Agreement(**dict(terms))
        except (TypeError, ConfigurationError) as exc:
            raise ValueError(f"{name}: {exc}") from None
    return agreements


Count = Annotated[int, BeforeValidator(_whole), Field(ge=1)]
Seconds = Annotated[float, BeforeValidator(_seconds)]
Duration = Annotated[str, BeforeValidator(_duration)]
Text = Annotated[str, BeforeValidator(_text)]
Route = Literal["inbox", "bypass"]


class HubConfig(BaseSettings):
    """Everything the hub needs to run; every field is also a flag and an EDINBOX_ environment variable.

    Built from keywords only (`HubConfig(db=...)`): it reads no environment itself; `edinbox.hub._settings` merges
    the file, the variables and the flags. A value that cannot work raises ConfigurationError naming the key.
    """

    model_config = SettingsConfigDict(env_prefix="EDINBOX_", frozen=True, extra="forbid", validate_default=True)

    db: Text = Field("sqlite:///edinbox.db", description="postgresql://user@host/db or sqlite:///hub.db")
    source: Text = Field("", description="dir:///srv/edi, amqp://, nats://, redis:// or kafka://")
    consumer: Annotated[str, BeforeValidator(_name)] = Field("accounting", description="consumer name in the journal")
    table: Text = Field("inbox", description='journal table, schema-qualified on PostgreSQL: "edi.inbox"')
    batch_size: Count = Field(100, description="deliveries per receive, settled in one transaction")
    poll_timeout: Annotated[Seconds, Field(gt=0)] = Field(0.5, description="seconds a receive waits for a delivery")
    idle_timeout: Annotated[Seconds, Field(ge=0)] = Field(1.5, description="with --once: idle seconds before exit")
    max_attempts: Count = Field(5, description="handler failures before a message is dead")
    retry_immediate: Annotated[int, BeforeValidator(_whole), Field(ge=0)] = Field(
        2, description="handler failures retried at once; after them a failed message waits (--retry-first)"
    )
    retry_first: Duration = Field(
        "15s", description="a failed message's first wait before its next attempt; each later wait x4, at most 10m"
    )
    horizon: Duration = Field(
        "7d", description="the longest time a message can come back (broker, retries, operator replay)"
    )
    retention: Duration = Field(
        "30d", description="journal rows older than this may be purged (never shorter than the horizon)"
    )
    purge_every: Annotated[str, BeforeValidator(_period)] = Field(
        "", description='`run` purges the journal this often, as `edinbox purge` would ("1h"); "": never'
    )
    purge_max_rate: Annotated[float, BeforeValidator(_rate)] = Field(
        PURGE_MAX_RATE, description="a purge deletes at most this many rows per second (inf: no limit)"
    )
    lease: Duration = Field("5m", description="lease mode (an HTTP accounting sink): how long a claim is held")
    give_up_after: Annotated[str, BeforeValidator(_optional_duration)] = Field(
        "", description='exit 2 when a dependency stays down this long; "" waits for ever'
    )
    non_edi: Literal["reject", "inbox"] = Field(
        "reject", description='payloads that do not parse: "reject" (park) or "inbox" (keyed by producer id)'
    )
    max_payload: Annotated[int, BeforeValidator(_size)] = Field(
        MAX_PAYLOAD, description="bigger deliveries are parked unparsed (bytes, or 100KB, 32MiB, 1GiB; 32MiB)"
    )
    accounting: Text = Field(
        "", description="POST invoices to this HTTP API (lease mode) instead of the invoices table"
    )
    accounting_token_file: Text = Field(
        "", description='a file holding the accounting API\'s bearer token ("": EDINBOX_ACCOUNTING_TOKEN, if set)'
    )
    metrics_port: Annotated[int, BeforeValidator(_whole), Field(ge=0, le=65535)] = Field(
        0, description="`edinbox run` serves Prometheus' GET /metrics on this port (0: not at all)"
    )
    metrics_host: Text = Field(
        "127.0.0.1", description='the address /metrics binds to ("0.0.0.0" for a scraper on another host)'
    )
    metrics_public: bool = Field(
        False, description="allow a metrics_host beyond loopback: /metrics has no authentication (a warning is logged)"
    )
    default_route: Route = Field("inbox", description="the route of a message type [routes] does not name")
    routes: Annotated[dict[str, str], BeforeValidator(_routes)] = Field(
        default_factory=lambda: dict(DEFAULT_ROUTES), description='message type -> "inbox" | "bypass"'
    )
    relay: bool = Field(True, description="`run` also relays the outbox (acknowledgments) to its destinations")
    partners: Annotated[dict[str, Agreement], BeforeValidator(_partners)] = Field(
        default_factory=dict, description='partner agreements by "QUALIFIER:ID" ("*": every other partner)'
    )

    def agreement(self, partner: str) -> Agreement:
        """The agreement of the partner "qualifier:id": its own, else "*", else the defaults (nothing is sent)."""
        return self.partners.get(partner) or self.partners.get("*") or _NO_AGREEMENT

    @property
    def acknowledges(self) -> bool:
        """True when some agreement sends acknowledgments (the hub then reads what they need while planning)."""
        return any(a.outbound for a in self.partners.values())

    def __init__(self, **values: Any) -> None:
        """Validate the keywords; a value that cannot work is a ConfigurationError naming its key."""
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigurationError(describe(exc)) from exc

    @field_validator("table")
    @classmethod
    def _table_name(cls, table: str, info: ValidationInfo) -> str:
        """The journal's own rule for table names (schema-qualified on PostgreSQL and MariaDB, whose schemas are
        databases), checked with the settings."""
        db = info.data.get("db")
        schemes = ("postgresql", "postgres", "mysql", "mariadb")
        qualified = isinstance(db, str) and db.partition("://")[0].lower() in schemes
        parse_table(table, qualified=qualified)
        return table

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords only: the variables and the file are read by `edinbox.hub._settings`, for the command line."""
        return (init_settings,)

    def route(self, message_type: str) -> str:
        """The route ("inbox" or "bypass") for a message type such as INVOIC, 810, 997 or CONTRL."""
        return self.routes.get(message_type.upper(), self.default_route)

    def with_overrides(self, **values: Any) -> HubConfig:
        """A copy with the given fields replaced and validated; None values (an unset flag) keep the current value."""
        unknown = set(values) - set(type(self).model_fields)
        if unknown:
            raise ConfigurationError(f"unknown hub settings: {', '.join(sorted(unknown))}")
        return HubConfig(**{**self.model_dump(), **{k: v for k, v in values.items() if v is not None}})


def describe(exc: ValidationError, names: Mapping[str, str] | None = None) -> str:
    """One line per invalid value: the key (or what set it, from `names`) and the type expected."""
    lines = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or "settings"
        where = (names or {}).get(str(error["loc"][0]) if error["loc"] else "", key)
        if where != key and len(error["loc"]) > 1:
            where = f"{where} {'.'.join(str(p) for p in error['loc'][1:])}"
        message = str(error["msg"]).removeprefix("Value error, ")
        if "got " not in message and "input" in error and error["type"] != "value_error":
            message = f"{message}, got {error['input']!r}"
        lines.append(f"{where}: {message}")
    return "; ".join(lines)
