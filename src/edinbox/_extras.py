"""The optional extras: which driver a URL needs, and the one line that says how to install it.

`require(url)` imports the driver a database, source or HTTP URL needs and raises ConfigurationError
(`postgresql:// needs psycopg: pip install 'edinbox[postgres]'`) when it is missing, before anything is opened.
"""

from __future__ import annotations

import importlib
import warnings

from edinbox._errors import ConfigurationError

__all__ = ["EXTRAS", "require", "require_modules"]

EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "postgresql": (("psycopg", "psycopg_pool"), "postgres"),
    "postgres": (("psycopg", "psycopg_pool"), "postgres"),
    "mysql": (("pymysql", "asyncmy"), "mysql"),
    "mariadb": (("pymysql", "asyncmy"), "mysql"),
    "amqp": (("aio_pika",), "rabbitmq"),
    "amqps": (("aio_pika",), "rabbitmq"),
    "nats": (("nats",), "nats"),
    "redis": (("redis",), "redis"),
    "kafka": (("confluent_kafka",), "kafka"),
    "sftp": (("asyncssh",), "sftp"),
    "as2": (("cryptography", "asn1crypto", "h11", "httpx"), "as2"),
    "as2s": (("cryptography", "asn1crypto", "httpx"), "as2"),
    "mdn+http": (("httpx",), "as2"),
    "mdn+https": (("httpx",), "as2"),
    "http": (("httpx",), "http"),
    "https": (("httpx",), "http"),
}
"""URL scheme -> (modules its driver needs, the extra that installs them)."""


def require(url: str) -> None:
    """Import the driver `url`'s scheme needs; a ConfigurationError saying which extra to install when it is missing.

    Schemes without an extra (sqlite, dir) and empty URLs need nothing.
    """
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    modules, extra = EXTRAS.get(scheme, ((), ""))
    require_modules(modules, extra=extra, needed_by=f"{scheme}://")


def require_modules(modules: tuple[str, ...], *, extra: str, needed_by: str) -> None:
    """Import each of `modules`; a ConfigurationError `<needed_by> needs <module>: pip install 'edinbox[<extra>]'`
    at the first one missing."""
    for module in modules:
        try:
            with warnings.catch_warnings():  # a driver's own import-time warnings (asyncssh's DSA names) are noise
                warnings.simplefilter("ignore")
                importlib.import_module(module)
        except ImportError:
            raise ConfigurationError(f"{needed_by} needs {module}: pip install 'edinbox[{extra}]'") from None
