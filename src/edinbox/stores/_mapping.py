"""The one place a driver's exceptions become edinbox's StoreError; each store names its driver's base error."""

from __future__ import annotations

from types import TracebackType
from typing import ClassVar

from edinbox._errors import StoreError
from edinbox._urls import mask

__all__ = ["MappedErrors"]


class MappedErrors:
    """Turn the driver's errors raised while doing `action` into StoreError (credentials masked).

    A class rather than a generator-based context manager: it wraps every statement on the hot path.
    """

    __slots__ = ("action",)

    database: ClassVar[str]
    """How messages name the database."""
    driver_error: ClassVar[type[Exception]]
    """The driver's base exception class."""

    def __init__(self, action: str) -> None:
        self.action = action

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, self.driver_error):
            raise StoreError(f"{self.database} failed to {self.action}: {mask(str(exc)).strip()}") from exc
