"""The ORM side of a delivery in an SQLAlchemy session whose savepoint is the inbox's own (no I/O).

A delivery joined to a session (`process(session=)`) runs in a savepoint of the inbox's own while the session has
nothing to flush. SQLAlchemy knows nothing of that savepoint, so this module does for the session what a rollback of
its nested transaction would, and bounds each of the session's flushes by a nested transaction of the session's own,
with SQLAlchemy's session events only:

- `before_flush` (`_flushing`): a flush at the level the delivery began at opens the session's nested transaction
  inside the inbox's savepoint (`Delivery.nested`), so that a failed flush rolls back to it, never the caller's whole
  transaction; `after_transaction_end` (`_ended`) releases it as soon as the flush's own transaction ends. A
  flush inside a nested transaction the handler opened itself is bounded by that one. The flush `begin_nested()`
  runs before its own savepoint is taken is bounded the same way: its nested transaction is released before the
  handler's is made the session's current one, so both stay in the session's list of transactions;
- `pending_to_persistent` and `persistent_to_deleted` note the objects the delivery's flushes inserted or deleted,
  and `Delivery.discard` (after the handler failed and the savepoint rolled back) makes the inserted ones transient
  again, brings the deleted ones back, expunges new objects, reverts pending deletions and expires the objects whose
  rows may have changed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Delivery", "pending", "watch"]

UNIT = "edinbox.delivery"
"""The key in the session's `info` of the delivery under way in the inbox's own savepoint (None between them)."""


def pending(orm: Any) -> bool:
    """Whether the session holds ORM state not yet flushed (new, changed or deleted objects)."""
    return bool(orm.new or orm.dirty or orm.deleted)


def watch(orm: Any) -> None:
    """Listen to the session's flushes (once per session: the listeners stay, idle between deliveries)."""
    if UNIT in orm.info:
        return
    from sqlalchemy import event

    event.listen(orm, "before_flush", _flushing)
    event.listen(orm, "after_transaction_end", _ended)
    event.listen(orm, "pending_to_persistent", _inserted)
    event.listen(orm, "persistent_to_deleted", _deleted)
    orm.info[UNIT] = None


class Delivery:
    """One delivery's ORM bookkeeping in the inbox's own savepoint, from `start` to `stop`."""

    def __init__(self, orm: Any) -> None:
        """Begin watching `orm` (a clean session, `watch`ed) for this delivery."""
        self.orm = orm
        self.nested: Any = None
        """The session's nested transaction bounding the flush under way (or one that failed, left to roll back)."""
        self.base = orm.get_nested_transaction()
        """The session's nested transaction when the delivery began (None: none): the one flushes open it under."""
        self.inserted: list[Any] = []
        self.deleted: list[Any] = []
        self.flushed = False
        """Something was flushed in the delivery."""
        orm.info[UNIT] = self

    def stop(self) -> None:
        """The delivery's savepoint ended: the session's flushes are its own again."""
        if self.orm.info.get(UNIT) is self:
            self.orm.info[UNIT] = None

    def discard(self) -> None:
        """Undo in the session what the rolled-back savepoint undid in the database (see the module's docstring)."""
        orm = self.orm
        from sqlalchemy.orm import make_transient, make_transient_to_detached

        for obj in self.inserted:
            make_transient(obj)  # out of the session too
        for obj in self.deleted:  # its row is back: persistent again under its key
            make_transient(obj)
            make_transient_to_detached(obj)
            orm.add(obj)
        for obj in list(orm.new):
            orm.expunge(obj)
        for obj in list(orm.deleted):
            orm.expunge(obj)
            orm.add(obj)
        if self.flushed or self.deleted:
            orm.expire_all()
            return
        for obj in list(orm.dirty):
            orm.expire(obj)


def _delivery(orm: Any) -> Delivery | None:
    """The delivery under way in the inbox's own savepoint on `orm`, if any."""
    found: Delivery | None = orm.info.get(UNIT)
    return found


def _flushing(orm: Any, *_: Any) -> None:
    """`before_flush`: at the level the delivery began at, open the nested transaction the flush then runs in (a
    nested transaction opened during a flush takes no snapshot, so it never flushes by itself)."""
    delivery = _delivery(orm)
    if delivery is None:
        return
    delivery.flushed = True
    if delivery.nested is None and orm.get_nested_transaction() is delivery.base:
        delivery.nested = orm.begin_nested()


def _ended(orm: Any, transaction: Any) -> None:
    """`after_transaction_end`: the flush's own transaction under the delivery's nested one ended, so release that
    one now (its rows stay in the inbox's savepoint); after a failed flush it is inactive and stays for the
    delivery's rollback."""
    delivery = _delivery(orm)
    if delivery is None or delivery.nested is None or transaction.parent is not delivery.nested:
        return
    if delivery.nested.is_active:
        nested, delivery.nested = delivery.nested, None
        nested.commit()


def _inserted(orm: Any, instance: Any) -> None:
    """`pending_to_persistent`: note an object a flush in the delivery inserted."""
    delivery = _delivery(orm)
    if delivery is not None:
        delivery.inserted.append(instance)


def _deleted(orm: Any, instance: Any) -> None:
    """`persistent_to_deleted`: note an object a flush in the delivery deleted."""
    delivery = _delivery(orm)
    if delivery is not None:
        delivery.deleted.append(instance)
