"""The hub's configuration: one typed model (pydantic-settings) for the TOML file, `EDINBOX_` variables and flags.

Each field of `HubConfig` is a key of `[hub]` in the TOML file, a flag of the commands that take it and an
`EDINBOX_<FIELD>` variable; its type and description are written once, here. `edinbox config --example` prints the
file this model describes (`example_toml()`), so the documentation cannot drift from it. Loading a file and merging
the variables and flags is `_settings`. A value of the wrong type is a ConfigurationError naming the key
and the type expected; a duration needs its unit (`30s`, `15m`, `12h`, `7d`, `2w`).

Every value is checked here (the converters of `_values`), before anything runs, without any I/O: each
number within its range (`LIMITS`), each URL parsed (database, source, accounting, the partners' outbound
destinations: ports 1-65535, a host where one is required, the source's options known and in range for this
consumer and batch size), so a typo stops the command with one line instead of being waited out as an outage or
charged to the messages.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from edinbox._core import parse_table
from edinbox._dead import check_destination as check_dead_letters
from edinbox._errors import ConfigurationError
from edinbox._payloads import PAYLOAD_CAP
from edinbox._urls import mask
from edinbox.edi import Overlay
from edinbox.hub.config._terms import levels, overlay, party_names
from edinbox.hub.config._values import (
    LIMITS,
    MAX_CONSUMER,
    MAX_DURATION,
    accounting_url,
    bind_host,
    byte_size,
    consumer_name,
    database,
    duration,
    duration_text,
    lease_duration,
    limited,
    optional_duration,
    parse_duration,
    parse_size,
    period,
    rows_per_second,
    seconds,
    shown,
    text_only,
    whole_number,
)
from edinbox.sources import check_destination, check_url

__all__ = [
    "DEFAULT_ROUTES",
    "LIMITS",
    "MAX_CONSUMER",
    "MAX_DURATION",
    "MAX_PAYLOAD",
    "PURGE_MAX_RATE",
    "Agreement",
    "HubConfig",
    "Route",
    "describe",
    "parse_duration",
    "parse_size",
]


class Route(StrEnum):
    """Where an item of a delivery goes (an interchange, or a whole payload that is not one); its value is the text
    the settings, the logs and the traces use."""

    INBOX = "inbox"
    """Through the inbox: journaled by its key, its invoices created once."""
    BYPASS = "bypass"
    """Around the inbox (a naturally idempotent message type: acknowledgments): acked, nothing journaled."""
    REJECT = "reject"
    """Parked with its reason in the rejected table (data that can never be processed); never a setting's value."""


MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: a delivery bigger than this is parked with its reason, never parsed."""

PURGE_MAX_RATE = 10000.0
"""The default `purge_max_rate`: rows per second that keep `process()`'s p99 within 1.5x during a purge
(bench/purge.py, docs/scaling.md)."""

DEFAULT_ROUTES: Mapping[str, Route] = MappingProxyType(
    {
        "INVOIC": Route.INBOX,
        "810": Route.INBOX,
        # acknowledgments are naturally idempotent: a second copy changes nothing
        "997": Route.BYPASS,
        "999": Route.BYPASS,
        "TA1": Route.BYPASS,
        "CONTRL": Route.BYPASS,
        "APERAK": Route.BYPASS,
    }
)


def _routes(value: object) -> object:
    """Routes by upper-case message type over the defaults."""
    if not isinstance(value, Mapping):
        raise ValueError(f'expected a table of TYPE = "inbox" | "bypass", got {value!r}')
    routes = {**DEFAULT_ROUTES, **{str(k).upper(): v for k, v in value.items()}}
    for kind, route in routes.items():
        if route not in (Route.INBOX, Route.BYPASS):
            raise ValueError(f"{kind}: expected 'inbox' or 'bypass', got {route!r}")
    return {kind: Route(route) for kind, route in routes.items()}


ACKNOWLEDGMENTS = ("997", "999", "none")
TA1 = ("requested", "always", "never")
DUPLICATES = ("notify", "silent")
VALIDATE = ("off", "report", "strict")


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

    Validation against the shipped implementation guides (docs/validation.md): `validate` "off" (the default: no
    check), "report" (errors are listed in the acknowledgment, the sets accepted with errors) or "strict" (a set in
    error is rejected, and its interchange parked); `require` and `allow` are the partner's overlay on the guides
    ("BIG04, RFF+ON"; "REF*20, ZZZ", see `edinbox.edi.Overlay`).
    `ledger`: the control-number levels kept for the partner (`levels`, docs/ledger.md; default: interchange, group).

    AS2 (an `as2://` source, see docs/as2.md): `as2_id` is the partner's AS2 name, `as2_hub_id` ours in this
    agreement, `as2_certificate` the partner's certificate file, `as2_key` and `as2_hub_certificate` our private key
    and certificate files, `as2_security` what its messages must carry at least ("signed+encrypted", "signed",
    "encrypted", "none"). Without `as2_id` the partner sends no AS2.
    """

    outbound: str = ""
    acknowledgment: str = "997"
    ta1: str = "requested"
    duplicates: str = "notify"
    sender: str = ""
    as2_id: str = ""
    as2_hub_id: str = ""
    as2_certificate: str = ""
    as2_key: str = ""
    as2_hub_certificate: str = ""
    as2_security: str = "signed+encrypted"
    validate: str = "off"
    require: str = ""
    allow: str = ""
    ledger: str = ""

    def __post_init__(self) -> None:
        """Refuse values that cannot work, with a sentence saying which."""
        if self.as2_id and not (self.as2_hub_id and self.as2_certificate and self.as2_key and self.as2_hub_certificate):
            raise ConfigurationError(
                "an AS2 agreement (as2_id) needs as2_hub_id, as2_certificate, as2_key and as2_hub_certificate"
            )
        checked = (
            ("acknowledgment", ACKNOWLEDGMENTS),
            ("ta1", TA1),
            ("duplicates", DUPLICATES),
            ("validate", VALIDATE),
        )
        for name, allowed in checked:
            if getattr(self, name) not in allowed:
                raise ConfigurationError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.outbound and "://" not in self.outbound:
            raise ConfigurationError(f"outbound must be a URL (dir://, amqp://, ...), not {self.outbound!r}")
        if self.sender and ":" not in self.sender:
            raise ConfigurationError(f"sender must be QUALIFIER:ID (e.g. ZZ:HUB), not {self.sender!r}")
        try:
            self.overlay  # noqa: B018 (read to check it)
            levels(self.ledger)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None

    @property
    def overlay(self) -> Overlay:
        """The partner's overlay on the implementation guides (`require`, `allow`)."""
        return overlay(self.require, self.allow)


_NO_AGREEMENT = Agreement()


_TERMS = tuple(f.name for f in fields(Agreement))


def _partners(value: object) -> object:
    """Agreements by partner: a table of tables (`[partners."ZZ:ACME"]`), each checked as an Agreement, its
    outbound URL as a destination."""
    if not isinstance(value, Mapping):
        raise ValueError(f'expected tables [partners."QUALIFIER:ID"], got {value!r}')
    agreements = {}
    for name, terms in value.items():
        if isinstance(terms, Agreement):
            agreements[str(name)] = terms
            continue
        if not isinstance(terms, Mapping):
            raise ValueError(f"{name}: expected a table of {', '.join(_TERMS)}")
        for key, term in terms.items():
            if key not in _TERMS:
                close = difflib.get_close_matches(str(key), _TERMS, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(_TERMS)}"
                raise ValueError(f"{name}: unknown key {str(key)[:80]!r} ({hint})")
            if not isinstance(term, str):
                raise ValueError(f"{name}: {key} must be text, got {shown(term)}")
        try:
            agreement = Agreement(**dict(terms))
            if agreement.outbound:
                check_destination(agreement.outbound.replace("{id}", "PARTNER"))
        except ConfigurationError as exc:
            raise ValueError(f"{name}: {exc}") from None
        agreements[str(name)] = agreement
    return agreements


Count = Annotated[int, BeforeValidator(whole_number), Field(ge=1)]
Seconds = Annotated[float, BeforeValidator(seconds)]
Shown = PlainSerializer(duration_text)
"""A duration setting dumped as the file writes it (`7d`; empty for none), for `config --show` and the relay child."""
Duration = Annotated[timedelta, BeforeValidator(duration), Shown]
Period = Annotated[timedelta | None, BeforeValidator(period), Shown]
Text = Annotated[str, BeforeValidator(text_only)]


class HubConfig(BaseSettings):
    """Everything the hub needs to run; every field is also a flag and an EDINBOX_ environment variable.

    Built from keywords only (`HubConfig(db=...)`): it reads no environment itself; `_settings` merges
    the file, the variables and the flags. A value that cannot work raises ConfigurationError naming the key.
    """

    model_config = SettingsConfigDict(env_prefix="EDINBOX_", frozen=True, extra="forbid", validate_default=True)

    db: Annotated[str, BeforeValidator(database)] = Field(
        "sqlite:///edinbox.db", description="postgresql://user@host/db or sqlite:///hub.db"
    )
    source: Text = Field("", description="dir:///srv/edi, amqp://, nats://, redis:// or kafka://")
    consumer: Annotated[str, BeforeValidator(consumer_name)] = Field(
        "accounting", description=f"consumer name in the journal (at most {MAX_CONSUMER} characters)"
    )
    table: Text = Field("inbox", description='journal table, schema-qualified on PostgreSQL: "edi.inbox"')
    batch_size: Annotated[Count, limited("batch_size")] = Field(
        100, description="deliveries per receive, settled in one transaction (1-10000)"
    )
    poll_timeout: Annotated[Seconds, limited("poll_timeout")] = Field(
        0.5, description="seconds a receive waits for a delivery (at most 3600)"
    )
    idle_timeout: Annotated[Seconds, limited("idle_timeout")] = Field(
        1.5, description="with --once: idle seconds before exit"
    )
    max_attempts: Annotated[Count, limited("max_attempts")] = Field(
        5, description="handler failures before a message is dead (1-10000)"
    )
    retry_immediate: Annotated[int, BeforeValidator(whole_number), Field(ge=0, le=10000)] = Field(
        2, description="handler failures retried at once; after them a failed message waits (--retry-first)"
    )
    retry_first: Duration = Field(
        timedelta(seconds=15),
        description="a failed message's first wait before its next attempt; each later wait x4, at most 10m",
    )
    horizon: Duration = Field(
        timedelta(days=7), description="the longest time a message can come back (broker, retries, operator replay)"
    )
    retention: Duration = Field(
        timedelta(days=30), description="journal rows older than this may be purged (never shorter than the horizon)"
    )
    duplicate_window: Duration = Field(
        timedelta(days=30), description="`edinbox ledger`: a control number sent again within this long is a duplicate"
    )
    purge_every: Period = Field(
        timedelta(hours=1),
        description='`run` purges rows older than the retention this often (as `edinbox purge`); "off": never',
    )
    purge_max_rate: Annotated[float, BeforeValidator(rows_per_second)] = Field(
        PURGE_MAX_RATE, description="a purge deletes at most this many rows per second (inf: no limit)"
    )
    lease: Annotated[timedelta, BeforeValidator(lease_duration), Shown] = Field(
        timedelta(minutes=5), description="lease mode (an HTTP accounting sink): how long a claim is held"
    )
    give_up_after: Annotated[timedelta | None, BeforeValidator(optional_duration), Shown] = Field(
        None, description='exit 2 when a dependency stays down this long; "" waits for ever'
    )
    non_edi: Literal["reject", "inbox"] = Field(
        "reject", description='payloads that do not parse: "reject" (park) or "inbox" (keyed by producer id)'
    )
    max_payload: Annotated[int, BeforeValidator(byte_size), limited("max_payload")] = Field(
        MAX_PAYLOAD, description="bigger deliveries are parked unparsed (bytes, or 100KB, 32MiB, 1GiB; at most 1GiB)"
    )
    keep_payloads: bool = Field(
        True, description="keep each processed interchange's bytes beside the journal (show, search, export)"
    )
    payload_cap: Annotated[int, BeforeValidator(byte_size), limited("payload_cap")] = Field(
        PAYLOAD_CAP, description="a longer interchange keeps only this many first bytes, with its digest (4MiB)"
    )
    accounting: Annotated[str, BeforeValidator(accounting_url)] = Field(
        "", description="POST invoices to this HTTP API (lease mode) instead of the invoices table"
    )
    accounting_token_file: Text = Field(
        "", description='a file holding the accounting API\'s bearer token ("": EDINBOX_ACCOUNTING_TOKEN, if set)'
    )
    metrics_port: Annotated[int, BeforeValidator(whole_number), limited("metrics_port")] = Field(
        0, description="`edinbox run` serves Prometheus' GET /metrics on this port (0: not at all)"
    )
    metrics_host: Annotated[str, BeforeValidator(bind_host)] = Field(
        "127.0.0.1", description='the address /metrics binds to ("0.0.0.0" for a scraper on another host)'
    )
    metrics_public: bool = Field(
        False, description="allow a metrics_host beyond loopback: /metrics has no authentication (a warning is logged)"
    )
    default_route: Annotated[Literal["inbox", "bypass"], AfterValidator(Route)] = Field(
        "inbox", description="the route of a message type [routes] does not name"
    )
    routes: Annotated[dict[str, Route], BeforeValidator(_routes)] = Field(
        default_factory=lambda: dict(DEFAULT_ROUTES), description='message type -> "inbox" | "bypass"'
    )
    relay: bool = Field(True, description="`run` also relays the outbox (acknowledgments) to its destinations")
    destinations: Text = Field(
        "", description="broker URLs with their passwords, space-separated: the outbox keeps its rows' without"
    )
    dead_letters: Text = Field(
        "",
        description='also publish each message parked DEAD here, with why (amqp://host/?queue=errors; "": nowhere)',
    )
    partners: Annotated[dict[str, Agreement], BeforeValidator(_partners)] = Field(
        default_factory=dict, description='partner agreements by "QUALIFIER:ID" ("*": every other partner)'
    )
    unknown_partners: Literal["reject", "accept"] = Field(
        "reject",
        description='with [partners], a sender without an agreement (and no "*"): "reject" (park) or "accept"',
    )
    parties: Text = Field(
        "", description='our own "QUALIFIER:ID"s, comma-separated: an interchange to another is parked ("": any)'
    )
    unknown_outbound: Text = Field(
        "", description='where a refused unknown partner\'s TA1 / CONTRL goes ({id}: its id; "": it gets none)'
    )

    def agreement(self, partner: str) -> Agreement:
        """The agreement of the partner "qualifier:id": its own, else "*", else the defaults (nothing is sent)."""
        return self.partners.get(partner) or self.partners.get("*") or _NO_AGREEMENT

    @property
    def credentials(self) -> tuple[str, ...]:
        """The URLs whose passwords the relay may give an outbox row (kept without one): `destinations`, then the
        source and the partners' outbound URLs."""
        outbound = (a.outbound for a in self.partners.values() if a.outbound)
        dead = [self.dead_letters] if self.dead_letters else []
        return (*self.destinations.split(), *([self.source] if self.source else []), *outbound, *dead)

    @property
    def acknowledges(self) -> bool:
        """True when some agreement (or `unknown_outbound`) sends acknowledgments (the hub then reads what they
        need while planning)."""
        return bool(self.unknown_outbound) or any(a.outbound for a in self.partners.values())

    @property
    def admits_everyone(self) -> bool:
        """True when every sender gets in: no agreement at all, a `"*"` agreement, or `unknown_partners = "accept"`."""
        return not self.partners or "*" in self.partners or self.unknown_partners == "accept"

    def known(self, partner: str) -> bool:
        """Whether the sender "qualifier:id" gets in: its own agreement, `"*"`, or a hub that admits everyone."""
        return self.admits_everyone or partner in self.partners

    def ours(self, receiver: str) -> bool:
        """Whether an interchange addressed to "qualifier:id" is for this hub: one of `parties` (empty: any)."""
        names = party_names(self.parties)
        return not names or receiver in names

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

    @field_validator("parties")
    @classmethod
    def _parties(cls, parties: str) -> str:
        """Each of our parties written as agreements name partners: "QUALIFIER:ID"."""
        for party in (p.strip() for p in parties.split(",")):
            if party and ":" not in party:
                raise ValueError(f"expected QUALIFIER:ID (e.g. ZZ:HUB), got {party!r}")
        return parties

    @field_validator("dead_letters")
    @classmethod
    def _dead_letters(cls, destination: str) -> str:
        """A destination its publisher can send to and whose headers can say why a message died, or empty."""
        if destination:
            check_destination(destination)
            check_dead_letters(destination)
        return destination

    @field_validator("unknown_outbound")
    @classmethod
    def _unknown_outbound(cls, outbound: str) -> str:
        """A URL, as an agreement's `outbound`, or empty."""
        if outbound and "://" not in outbound:
            raise ValueError(f"expected a URL (dir://, amqp://, ...), got {outbound!r}")
        return outbound

    @model_validator(mode="after")
    def _source_url(self) -> HubConfig:
        """The source URL as this hub would open it (its consumer, horizon, payload limit and batch size), built
        without I/O: a malformed URL, an unknown option or one out of range is a configuration error now."""
        if self.source:
            try:
                check_url(
                    self.source,
                    consumer=self.consumer,
                    horizon=self.horizon,
                    max_payload=self.max_payload,
                    batch=self.batch_size,
                )
            except ValueError as exc:  # a ConfigurationError, or a converter's own complaint
                error = PydanticCustomError("value_error", "{error}", {"error": str(exc)})
                details = InitErrorDetails(type=error, loc=("source",), input=mask(self.source))
                raise ValidationError.from_exception_data(type(self).__name__, [details]) from None
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keywords only: the variables and the file are read by `_settings`, for the command line."""
        return (init_settings,)

    def route(self, message_type: str) -> Route:
        """The route (inbox or bypass) for a message type such as INVOIC, 810, 997 or CONTRL."""
        return self.routes.get(message_type.upper()) or Route(self.default_route)

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
