"""The effective settings of a command: the TOML file, then `EDINBOX_` variables, then flags, each value's origin kept.

`load_settings(path, flags)` is what every command calls before it touches anything: an unknown section or key
(with the closest valid name), a value of the wrong type or a duration without its unit is one ConfigurationError
naming where the value came from. The variables are read with pydantic-settings' own `EnvSettingsSource`, against
the same model (`HubConfig`) that types the file and the flags; only the command line calls this module.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import EnvSettingsSource

from edinbox._errors import ConfigurationError
from edinbox._files import read_small
from edinbox._urls import mask
from edinbox.hub.config._model import HubConfig, describe

__all__ = ["ORIGINS", "Settings", "example_toml", "load_config", "load_settings"]

ORIGINS = ("default", "file", "variable", "flag")
"""Where a value came from, weakest first: each overrides the ones before it."""

_SECTIONS = ("hub", "routes", "partners")
_TABLES = ("routes", "partners")
"""Fields kept in a section of their own, not under [hub]."""
_HUB_KEYS = tuple(name for name in HubConfig.model_fields if name not in _TABLES)


@dataclass(frozen=True, slots=True)
class Settings:
    """The validated configuration and, for each field, where its value came from (one of ORIGINS)."""

    config: HubConfig
    origins: Mapping[str, str]

    def rows(self) -> list[dict[str, str]]:
        """One row per setting for `edinbox config --show`: name, value as TOML writes it (passwords masked), origin."""
        rows = []
        for name, value in self.config.model_dump().items():
            origin = self.origins.get(name, "default")
            if name == "routes":
                rows += [
                    {"setting": f"routes.{kind}", "value": route, "origin": origin} for kind, route in value.items()
                ]
            elif name == "partners":
                rows += [
                    {"setting": f"partners.{partner}.{key}", "value": mask(str(v)), "origin": origin}
                    for partner, terms in value.items()
                    for key, v in terms.items()
                ]
            else:
                rows.append(
                    {"setting": name, "value": mask(value) if isinstance(value, str) else value, "origin": origin}
                )
        return rows


def _closest(name: str, known: Iterable[str]) -> str:
    """`; did you mean X?` for the closest known name, or nothing."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


MAX_FILE = 1024 * 1024
"""The largest settings file read (1 MiB): a hub.toml is a few kilobytes."""


def _read_text(path: Path) -> str:
    """The text of a settings file: a regular file (a FIFO or a device is refused without being opened, so nothing
    blocks), UTF-8 with or without a byte-order mark; invalid UTF-8 is an error naming its byte offset."""
    data = read_small(path, what="configuration", limit=MAX_FILE)
    if len(data) > MAX_FILE:
        raise ConfigurationError(f"the configuration {path} is bigger than {MAX_FILE // 1024} KiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigurationError(f"{path} is not UTF-8: invalid byte at offset {exc.start}") from None


def _read_file(path: Path) -> dict[str, Any]:
    """The `[hub]` keys and the `[routes]` and `[partners]` tables of a TOML file, every section and key checked."""
    try:
        data = tomllib.loads(_read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from exc
    for section, value in data.items():
        if section not in _SECTIONS:
            raise ConfigurationError(f"{path}: unknown section [{section}]{_closest(section, _SECTIONS)}")
        if not isinstance(value, dict):
            raise ConfigurationError(f"{path}: {section} must be a table ([{section}])")
    hub = data.get("hub", {})
    for key in hub:
        if key not in _HUB_KEYS:
            raise ConfigurationError(f"{path}: unknown key {key!r} in [hub]{_closest(key, _HUB_KEYS)}")
    return {**hub, **{table: data[table] for table in _TABLES if table in data}}


def _read_variables() -> dict[str, Any]:
    """The `EDINBOX_<FIELD>` variables that are set (routes excepted: `EDINBOX_ROUTES` is `run --route`)."""
    found = EnvSettingsSource(HubConfig, env_prefix="EDINBOX_", case_sensitive=False)()
    return {k: v for k, v in found.items() if k in _HUB_KEYS}


def load_settings(
    path: Path | None = None, flags: Mapping[str, Any] | None = None, *, names: Mapping[str, str] | None = None
) -> Settings:
    """The file's settings, overridden by `EDINBOX_` variables, overridden by the flags given (None: not given).

    `names` maps a field to the flag that set it (`retention` -> `--older-than`) for error messages.
    """
    layers = {
        "file": _read_file(path) if path is not None else {},
        "variable": _read_variables(),
        "flag": {k: v for k, v in (flags or {}).items() if v is not None},
    }
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    where: dict[str, str] = {}
    for origin, values in layers.items():
        for key, value in values.items():
            if key not in HubConfig.model_fields:
                raise ConfigurationError(f"unknown hub setting {key!r}{_closest(key, _HUB_KEYS)}")
            merged[key], origins[key] = value, origin
            where[key] = _where(origin, key, path, names or {})
    return Settings(_validate(merged, where), origins)


def _validate(values: Mapping[str, Any], where: Mapping[str, str]) -> HubConfig:
    """The model of `values`; an invalid one named as the operator set it (`where`)."""
    try:
        return HubConfig(**values)
    except ConfigurationError as exc:
        if isinstance(exc.__cause__, ValidationError):
            raise ConfigurationError(describe(exc.__cause__, where)) from None
        raise


def _where(origin: str, key: str, path: Path | None, names: Mapping[str, str]) -> str:
    """How the operator set this key: `hub.toml [hub] batch_size`, `EDINBOX_BATCH_SIZE` or `--batch-size`."""
    if origin == "file":
        return f"{path} [{key if key in _TABLES else 'hub'}]{'' if key in _TABLES else ' ' + key}"
    if origin == "variable":
        return f"EDINBOX_{key.upper()}"
    return names.get(key, "--" + key.replace("_", "-"))


def load_config(path: Path | None) -> HubConfig:
    """Read `[hub]`, `[routes]` and `[partners]` from a TOML file (None gives the defaults); no variables, no flags."""
    if path is None:
        return HubConfig()
    data = _read_file(path)
    return _validate(data, {k: _where("file", k, path, {}) for k in data})


def _toml_value(value: Any) -> str:
    """A value as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def example_toml() -> str:
    """A commented `hub.toml` with every setting at its default, generated from HubConfig."""
    defaults = HubConfig()
    values = defaults.model_dump()
    lines = ["# edinbox hub settings: every key is also a flag and an EDINBOX_<KEY> variable.", "[hub]"]
    for name, field in HubConfig.model_fields.items():
        if name in _TABLES:
            continue
        lines.append(f"# {field.description}")
        lines.append(f"{name} = {_toml_value(values[name])}")
    lines += ["", f"# {HubConfig.model_fields['routes'].description}", "[routes]"]
    lines += [f"{_toml_value(kind)} = {_toml_value(route)}" for kind, route in defaults.routes.items()]
    lines += [
        "",
        f"# {HubConfig.model_fields['partners'].description}; without one, a partner gets no acknowledgment",
        '# [partners."ZZ:ACME"]',
        '# outbound = "dir:///srv/edi/out/acme"   # any source URL; {id} is the partner\'s id',
        '# acknowledgment = "997"                 # X12: "997", "999" or "none"',
        '# ta1 = "requested"                      # TA1 / CONTRL: "requested", "always" or "never"',
        '# duplicates = "notify"                  # a re-sent interchange: "notify" or "silent"',
        '# sender = "ZZ:HUB"                      # our party; empty: the receiver the partner addressed',
    ]
    return "\n".join(lines) + "\n"
