"""The hub's configuration: a frozen value built from a TOML file, then overridden by flags and environment.

```toml
[hub]
db = "sqlite:///hub.db"         # or postgresql://user@host/db
source = "dir:///srv/edi"       # or amqp://, nats://, redis://, kafka://
consumer = "accounting"
table = "inbox"                 # schema-qualified on PostgreSQL: "edi.inbox"
batch_size = 20                 # deliveries per receive, settled in one transaction
poll_timeout = 0.5              # seconds a receive waits for the first delivery
idle_timeout = 1.5              # with --once: exit after the source was idle this long
max_attempts = 5
horizon = "7d"                  # the longest time a message can come back (broker, retries, operator replay)
retention = "30d"               # journal rows older than this may be purged (never shorter than the horizon)
lease = "5m"                    # lease mode (a non-transactional accounting sink): how long a claim is held
give_up_after = ""              # exit (code 2) when a dependency stays down this long; empty: wait forever
non_edi = "reject"              # payloads that do not parse: "reject" (park) or "inbox" (keyed by producer id)
max_payload = "32MiB"           # bigger payloads are parked unparsed (bytes, or 100KB, 32MiB, 1GiB)
relay = true                    # `run` also relays the outbox (acknowledgments) to its destinations

[partners."ZZ:ACME"]            # a trading partner's agreement, by its "qualifier:id" as sender (see Agreement)
outbound = "dir:///srv/edi/out/acme"   # where its acknowledgments go (any source URL); empty: none are sent
acknowledgment = "997"          # X12 functional acknowledgment: "997", "999" (005010 partners) or "none"
ta1 = "requested"               # X12 TA1 / EDIFACT CONTRL: "requested" (ISA14 / UNB 0031 = 1), "always", "never"
duplicates = "notify"           # a re-sent interchange: "notify" (TA1 R 025 / CONTRL UCI 4 26) or "silent"
sender = "ZZ:HUB"               # our party in its acknowledgments; empty: the receiver the partner addressed

[partners."*"]                  # the agreement of every partner without its own; `{id}` is the partner's id
outbound = "dir:///srv/edi/out/{id}"

[routes]                        # message type -> "inbox" | "bypass"
INVOIC = "inbox"
"810" = "inbox"
"997" = "bypass"
```
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from edinbox._errors import ConfigurationError

__all__ = ["DEFAULT_ROUTES", "MAX_PAYLOAD", "Agreement", "HubConfig", "load_config", "parse_duration", "parse_size"]

INBOX = "inbox"
BYPASS = "bypass"
_ROUTES = (INBOX, BYPASS)

MAX_PAYLOAD = 32 * 1024 * 1024
"""The default `max_payload`: a delivery bigger than this is parked with its reason, never parsed."""

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


ACKNOWLEDGMENTS = ("997", "999", "none")
TA1 = ("requested", "always", "never")
DUPLICATES = ("notify", "silent")


@dataclass(frozen=True, slots=True)
class Agreement:
    """What a trading partner gets back: the defaults are those of a partner without an agreement.

    With no `outbound` (the default, unless `[partners."*"]` sets one) nothing is sent. For EDIFACT partners `ta1`
    governs CONTRL (the interchange's answer) and `acknowledgment = "none"` turns it off too. An interchange of
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


@dataclass(frozen=True, slots=True)
class HubConfig:
    """Everything the hub needs to run; every field is also a flag and an EDINBOX_ environment variable."""

    db: str = "sqlite:///edinbox.db"
    source: str = ""
    consumer: str = "accounting"
    table: str = "inbox"
    batch_size: int = 20
    poll_timeout: float = 0.5
    idle_timeout: float = 1.5
    max_attempts: int = 5
    horizon: str = "7d"
    retention: str = "30d"
    lease: str = "5m"
    non_edi: str = "reject"
    give_up_after: str = ""
    max_payload: int = MAX_PAYLOAD
    """Bytes a delivery may have; a bigger one is parked unparsed (a size text such as "32MiB" is accepted)."""
    relay: bool = True
    """`edinbox run` also runs the outbox relay (false: run `edinbox relay` on its own)."""
    default_route: str = INBOX
    routes: Mapping[str, str] = field(default_factory=lambda: DEFAULT_ROUTES)
    partners: Mapping[str, Agreement] = field(default_factory=lambda: MappingProxyType({}))
    """Agreements by the partner's "qualifier:id"; "*" is the agreement of every other partner."""

    def agreement(self, partner: str) -> Agreement:
        """The agreement of the partner "qualifier:id": its own, else "*", else the defaults (nothing is sent)."""
        return self.partners.get(partner) or self.partners.get("*") or _NO_AGREEMENT

    @property
    def acknowledges(self) -> bool:
        """True when some agreement sends acknowledgments (the hub then reads what they need while planning)."""
        return any(a.outbound for a in self.partners.values())

    def __post_init__(self) -> None:
        """Refuse values that cannot work, with a sentence saying which."""
        if not isinstance(self.max_payload, int) or isinstance(self.max_payload, bool):
            object.__setattr__(self, "max_payload", parse_size(self.max_payload))
        if self.max_payload < 1:
            raise ConfigurationError("max_payload must be at least 1 byte")
        if self.batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        if self.poll_timeout <= 0 or self.idle_timeout < 0:
            raise ConfigurationError("poll_timeout must be positive and idle_timeout not negative")
        if self.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        if self.non_edi not in ("reject", INBOX):
            raise ConfigurationError(f"non_edi must be 'reject' or 'inbox', not {self.non_edi!r}")
        parse_duration(self.retention)  # `edinbox doctor` compares them; here they only have to parse
        parse_duration(self.horizon)
        parse_duration(self.lease)
        if self.give_up_after:
            parse_duration(self.give_up_after)
        if not self.consumer:
            raise ConfigurationError("consumer must not be empty")
        for kind, route in {**self.routes, "(default)": self.default_route}.items():
            if route not in _ROUTES:
                raise ConfigurationError(f"route for {kind} must be one of {', '.join(_ROUTES)}, not {route!r}")

    def route(self, message_type: str) -> str:
        """The route ("inbox" or "bypass") for a message type such as INVOIC, 810, 997 or CONTRL."""
        return self.routes.get(message_type.upper(), self.default_route)

    def with_overrides(self, **values: Any) -> HubConfig:
        """A copy with the given fields replaced; None values (an unset flag) keep the current value."""
        names = {f.name for f in fields(self)}
        unknown = set(values) - names
        if unknown:
            raise ConfigurationError(f"unknown hub settings: {', '.join(sorted(unknown))}")
        return replace(self, **{k: v for k, v in values.items() if v is not None})


_NO_AGREEMENT = Agreement()


def load_config(path: Path | None) -> HubConfig:
    """Read `[hub]` and `[routes]` from a TOML file (None gives the defaults)."""
    if path is None:
        return HubConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read the configuration {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
    hub = dict(data.get("hub", {}))
    routes = data.get("routes", {})
    partners = data.get("partners", {})
    if not isinstance(hub, dict) or not isinstance(routes, dict) or not isinstance(partners, dict):
        raise ConfigurationError(f"{path}: [hub], [routes] and [partners] must be tables")
    merged = {**DEFAULT_ROUTES, **{str(k).upper(): str(v) for k, v in routes.items()}}
    try:
        agreements = {str(name): Agreement(**dict(terms)) for name, terms in partners.items()}
        return HubConfig().with_overrides(**hub, routes=MappingProxyType(merged), partners=MappingProxyType(agreements))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{path}: {exc}") from exc


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """Parse `30d`, `12h`, `15m`, `45s` or a number of seconds into a timedelta."""
    match = _DURATION.match(text)
    if not match:
        raise ConfigurationError(f"{text!r} is not a duration (examples: 30d, 12h, 15m, 45s)")
    return timedelta(seconds=float(match[1]) * _UNITS[match[2]])


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
