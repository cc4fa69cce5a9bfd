"""Statements handed straight to SQLite's driver, for the writes that hold the write lock.

On SQLite the write lock is the whole database's, so whatever Python runs while a writer holds
it (building the statement, processing parameters, SQLAlchemy's execution and transaction
machinery) makes every other writer wait, and on a loaded host the holder is preempted with
the lock. A `DriverStatement` is compiled once from the SQLAlchemy construct (so the SQL is
still written in one place, as a construct); its parameters are processed before the lock
is taken, and `write_once` holds the lock for `BEGIN IMMEDIATE`, the statement, its rows and
`COMMIT` alone. Reads go the same way to skip the machinery, without any lock. Both run on a
`driver_connection`, a thread's own connection kept out of the pool.
"""

from __future__ import annotations

import functools
import operator
import random
import sqlite3
import threading
import time
import weakref
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Dialect, Engine, event, literal_column, null
from sqlalchemy.exc import OperationalError
from sqlalchemy.sql import visitors
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter

from consolidator.db.engine import SQLITE_BUSY_TIMEOUT_MS, WriteLockBusy
from consolidator.db.idle_driver import sqlite_utc_text as sqlite_utc_text
from consolidator.db.schema import UTCDateTime

Processor = Callable[[Any], Any] | None
Kept = TypeVar("Kept")


@dataclass(frozen=True)
class DriverStatement:
    """A SQLAlchemy statement compiled once for one dialect with `qmark` parameters: its SQL,
    the value of every parameter position (the statement's own or a name to fill), and the
    processors that turn values into what the driver stores and rows back into values.

    What does not change from one execution to the next is worked out here once (the
    statement's own values processed, which names to fill, which row columns to convert), so
    that an execution spends little Python on its parameters and rows: a claim runs this on
    every poll, and its Python costs it more than its SQL."""

    sql: str
    positions: tuple[str, ...]
    fixed: Mapping[str, Any]
    bind_processors: Mapping[str, Processor]
    row_type: type[tuple[Any, ...]]
    result_processors: tuple[Processor, ...]

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> DriverStatement:
        """`statement` compiled for `dialect`, its constant text and numbers written into the
        SQL (the driver binds each parameter on every execution)."""
        if "POSTCOMPILE" in str(statement.compile(dialect=dialect)):
            raise ValueError("a statement with expanding parameters cannot be compiled once")
        inlined = visitors.replacement_traverse(
            statement, {}, functools.partial(_inline_constant, dialect=dialect)
        )
        compiled = inlined.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler) and compiled.positiontup is not None
        names = tuple(compiled.positiontup)
        binds = {name: compiled.binds[name] for name in names}
        columns = list(statement.exported_columns)
        fields = [column.key or f"column_{index}" for index, column in enumerate(columns)]
        return cls(
            sql=compiled.string,
            positions=names,
            fixed={name: bind.value for name, bind in binds.items() if not bind.required},
            bind_processors={
                name: _bind_processor(bind.type, dialect) for name, bind in binds.items()
            },
            row_type=namedtuple("DriverRow", fields, rename=True),
            result_processors=tuple(_result_processor(c.type, dialect) for c in columns),
        )

    @functools.cached_property
    def _preset(self) -> dict[str, Any]:
        """The statement's own values, processed."""
        return {name: _processed(self.bind_processors[name], v) for name, v in self.fixed.items()}

    @functools.cached_property
    def _to_fill(self) -> tuple[tuple[str, Processor], ...]:
        return tuple((n, p) for n, p in self.bind_processors.items() if n not in self.fixed)

    @functools.cached_property
    def _in_order(self) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
        """The processed values in parameter order, as a tuple."""
        return _picker(self.positions)

    @functools.cached_property
    def _conversions(self) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
        return tuple((i, p) for i, p in enumerate(self.result_processors) if p is not None)

    def parameters(self, values: Mapping[str, Any] | None = None) -> tuple[Any, ...]:
        """The driver's parameters: `values` fill the named ones, processed as SQLAlchemy
        would, each name once however often the SQL uses it."""
        given = values or {}
        processed = self._preset.copy()
        for name, processor in self._to_fill:
            processed[name] = _processed(processor, given[name])
        if len(given) > len(self._to_fill):
            for name in self.fixed.keys() & given.keys():
                processed[name] = _processed(self.bind_processors[name], given[name])
        return self._in_order(processed)

    def binder(self, slots: Mapping[str, int]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
        """How to make the driver's parameters from a tuple of values already processed,
        `slots` giving each name's place in it (names may share one), the statement's own
        values filled in: for a caller that processes its values itself, each distinct one
        once."""
        missing = [name for name, _ in self._to_fill if name not in slots]
        if missing:
            raise ValueError(f"no place given for {missing}")
        size = max(slots.values(), default=-1) + 1
        own = {name: size + index for index, name in enumerate(self._preset)}
        constants = tuple(self._preset.values())
        pick = _picker(tuple(slots.get(name, own.get(name, -1)) for name in self.positions))
        return lambda values: pick(values + constants)

    def rows(self, raw: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Driver rows as named rows of values."""
        make = self.row_type._make  # type: ignore[attr-defined]
        if not self._conversions:
            return [make(row) for row in raw]
        converted = []
        for row in raw:
            values = list(row)
            for index, processor in self._conversions:
                if values[index] is not None:
                    values[index] = processor(values[index])
            converted.append(make(values))
        return converted


def _inline_constant(element: Any, dialect: Dialect) -> Any:
    """A statement's own text, number or null as SQL text; None (keep it) for anything else."""
    if not isinstance(element, BindParameter) or element.required or element.expanding:
        return None
    if element.value is None:
        return null()
    if type(element.value) not in (str, int):
        return None
    render = element.type.literal_processor(dialect)
    return None if render is None else literal_column(render(element.value), element.type)


def _picker(keys: tuple[Any, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The items at `keys` of a mapping or sequence, as a tuple."""
    if not keys:
        return lambda items: ()
    if len(keys) == 1:
        (only,) = keys
        return lambda items: (items[only],)
    return operator.itemgetter(*keys)


def _processed(processor: Processor, value: Any) -> Any:
    return value if processor is None or value is None else processor(value)


def _bind_processor(type_: Any, dialect: Dialect) -> Processor:
    if dialect.name == "sqlite" and isinstance(type_, UTCDateTime):
        return sqlite_utc_text
    processor: Processor = type_.dialect_impl(dialect).bind_processor(dialect)
    return processor


def _result_processor(type_: Any, dialect: Dialect) -> Processor:
    if dialect.name == "sqlite" and isinstance(type_, UTCDateTime):
        return _sqlite_utc_datetime
    processor: Processor = type_.dialect_impl(dialect).result_processor(dialect, None)
    return processor


def _sqlite_utc_datetime(text: str) -> datetime:
    """What `UTCDateTime` reads back on SQLite (the text SQLAlchemy parses with
    `fromisoformat`, made aware in UTC), in one step instead of the type machinery's three."""
    value = datetime.fromisoformat(text)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@functools.cache
def driver_statement(statement: Any, dialect: Dialect) -> DriverStatement:
    """`statement` compiled for `dialect`, once a process."""
    return DriverStatement.compile(statement, dialect)


class _ThreadConnections(Generic[Kept]):
    """An engine's connections kept one a thread, out of its pool: `open` makes this thread's
    (through the engine, so its connect events tune it), `close` ends one, whether its thread
    has ended, it was found broken (`drop`) or the engine is disposed (`close_all`, which
    `Engine.dispose` calls). A claim so spends nothing on a pool checkout, its return or the
    pool's ping, which together cost a claim more than its SQL. `usable` says whether a kept
    one may still be handed out (None: always)."""

    def __init__(
        self,
        open_: Callable[[], Kept],
        close: Callable[[Kept], None],
        usable: Callable[[Kept], bool] | None = None,
    ) -> None:
        self.open = open_
        self.close = close
        self.usable = usable
        self.local = threading.local()
        self.lock = threading.Lock()
        self.opened: list[tuple[weakref.ref[threading.Thread], Kept]] = []

    def connection(self) -> Kept:
        kept: Kept | None = getattr(self.local, "kept", None)
        if kept is not None and (self.usable is None or self.usable(kept)):
            return kept
        fresh = self.open()
        with self.lock:
            # A thread that has ended left its connection here, and this one's own may be
            # stale: close them.
            ended = [entry for entry in self.opened if _ended(entry[0]) or entry[1] is kept]
            self.opened = [entry for entry in self.opened if entry not in ended]
            self.opened.append((weakref.ref(threading.current_thread()), fresh))
        for _, gone in ended:
            self.close(gone)
        self.local.kept = fresh
        return fresh

    def drop(self) -> None:
        """Forget and close this thread's connection: the next one is opened afresh."""
        kept: Kept | None = getattr(self.local, "kept", None)
        self.local.kept = None
        if kept is None:
            return
        with self.lock:
            self.opened = [entry for entry in self.opened if entry[1] is not kept]
        self.close(kept)

    def close_all(self, _engine: Engine | None = None) -> None:
        with self.lock:
            opened, self.opened = self.opened, []
            self.local = threading.local()
        for _, connection in opened:
            self.close(connection)


def _ended(thread: weakref.ref[threading.Thread]) -> bool:
    alive = thread()
    return alive is None or not alive.is_alive()


_KEEPERS: weakref.WeakKeyDictionary[Engine, _ThreadConnections[Any]] = weakref.WeakKeyDictionary()
_KEEPERS_LOCK = threading.Lock()


def _keeper(
    engine: Engine, make: Callable[[Engine], _ThreadConnections[Kept]]
) -> _ThreadConnections[Kept]:
    """`engine`'s keeper (an engine is either SQLite's or PostgreSQL's, so it has one kind),
    made by `make` the first time and closed with the engine."""
    keeper = _KEEPERS.get(engine)
    if keeper is None:
        with _KEEPERS_LOCK:
            keeper = _KEEPERS.get(engine)
            if keeper is None:
                keeper = _KEEPERS[engine] = make(engine)
                event.listen(engine, "engine_disposed", keeper.close_all)
    return keeper


def _sqlite_keeper(engine: Engine) -> _ThreadConnections[sqlite3.Connection]:
    """Driver connections with the busy timeout off for good (no switching it off and on
    around the lock), detached from the pool, so closing one closes the driver's."""
    reference = weakref.ref(engine)

    def open_() -> sqlite3.Connection:
        owner = reference()
        assert owner is not None
        pooled = owner.raw_connection()
        driver = pooled.driver_connection
        assert isinstance(driver, sqlite3.Connection)
        pooled.detach()
        driver.execute("PRAGMA busy_timeout = 0")
        return driver

    return _ThreadConnections(open_, sqlite3.Connection.close)


def driver_connection(engine: Engine) -> sqlite3.Connection:
    """This thread's SQLite connection of `engine` as the driver's own, in autocommit (no
    SQLAlchemy `Connection` around it) and with the busy timeout off: `write_once` waits for
    the write lock itself, and a read that finds the database locked (only while a crashed
    writer's log is recovered) raises for the contention retry."""
    keeper: _ThreadConnections[sqlite3.Connection] = _keeper(engine, _sqlite_keeper)
    return keeper.connection()


def read_once(
    connection: sqlite3.Connection, statement: DriverStatement, parameters: tuple[Any, ...]
) -> list[Any]:
    """One read statement, in its own implicit transaction (the driver is in autocommit)."""
    try:
        raw = connection.execute(statement.sql, parameters).fetchall()
    except sqlite3.OperationalError as exc:
        raise OperationalError(statement.sql, parameters, exc) from exc
    return statement.rows(raw)


def write_once(
    connection: sqlite3.Connection,
    statement: DriverStatement,
    parameters: tuple[Any, ...],
    *,
    patience: float | None = None,
) -> tuple[int, list[tuple[Any, ...]]]:
    """The statement as a transaction of its own, with its row count and rows. The driver is
    in autocommit, so SQLite takes the write lock as the statement starts (as `BEGIN
    IMMEDIATE` would) and commits as it ends: the lock is held for the SQL alone, with no
    round trips for `BEGIN` and `COMMIT`. The lock is waited for in short, even sleeps (see
    `engine._begin_immediate`), up to `patience` seconds (then `WriteLockBusy`) or the busy
    timeout (then "database is locked", as SQLAlchemy raises it, for the contention retry);
    `connection` is a `driver_connection`, whose busy timeout is off. The caller processes
    the rows after the lock is gone. The first try reads no clock: most find the lock free."""
    deadline: float | None = None
    while True:
        try:
            cursor = connection.execute(statement.sql, parameters)
            rows = cursor.fetchall()
            return cursor.rowcount, rows
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise OperationalError(statement.sql, parameters, exc) from exc
            now = time.monotonic()
            if deadline is None:
                wait = SQLITE_BUSY_TIMEOUT_MS / 1000 if patience is None else patience
                deadline = now + wait
            elif now >= deadline:
                if patience is not None:
                    raise WriteLockBusy(f"the write lock stayed taken {patience} s") from exc
                raise OperationalError(statement.sql, parameters, exc) from exc
        time.sleep(random.uniform(0.0005, 0.0015))


def _autocommit_keeper(engine: Engine) -> _ThreadConnections[Connection]:
    """PostgreSQL connections checked out once and kept, in autocommit. The pool pings a
    connection at every checkout, a round trip as long as the claim's own statement, so a
    claim that checked one out on every poll paid twice the floor's round trips."""
    reference = weakref.ref(engine)

    def open_() -> Connection:
        owner = reference()
        assert owner is not None
        connection = owner.connect()
        connection.execution_options(isolation_level="AUTOCOMMIT")
        return connection

    def close(connection: Connection) -> None:
        if connection.closed:
            return
        # Its pool may be gone by now: closing alone would hand it back there, still open.
        connection.invalidate()
        connection.close()

    return _ThreadConnections(open_, close, _still_open)


def _still_open(connection: Connection) -> bool:
    return not connection.closed and not connection.invalidated


def autocommit_connection(engine: Engine) -> Connection:
    """This thread's kept PostgreSQL connection of `engine`, in autocommit: each statement on
    it is one round trip, with no pool checkout (and its ping) before it. One found broken is
    dropped (`drop_autocommit_connection`) and the next claim checks out a fresh, pinged one."""
    keeper: _ThreadConnections[Connection] = _keeper(engine, _autocommit_keeper)
    return keeper.connection()


def drop_autocommit_connection(engine: Engine) -> None:
    """Forget (and close) this thread's kept connection of `engine`, after it broke."""
    _keeper(engine, _autocommit_keeper).drop()
