"""The connection a PostgreSQL recorder appends through, kept from one record to the next.

Taking a connection from the library's pool and giving it back (psycopg_pool's locks, checks and
the library's wrapper) cost 70-90 µs of client CPU per live record, about a fifth of it
(bench/README.md, "Live recording"). A process appends one batch at a time, so the recorder takes
one of the pool's connections on its first append and keeps it: no session of its own (the pool
holds two anyway). It goes back to the pool (which closes a broken one) whenever a batch leaves it
other than idle: an error that broke it, a transaction not rolled back, a statement cut by a Ctrl-C
or by any exception a signal handler raised (its reply unread: sent again, the next statement would
fail "another command is already in progress" for ever). The next append takes another, so a
server restart costs one failed attempt, as before. It is kept after the recorder's own refusals of
a reply it read whole (a lost race, a later tail: a new session per refusal cost 8 racing writers
half their rate), and goes back when the store closes. Its errors are said in the library's terms,
as the pool's are, so deciding again after a lost race or an unreachable server works the same.

A process forked from the one that opened the store (multiprocessing's 'fork') inherits the kept
connection and the pool's idle ones, each the parent's session on a shared socket: used there, the
child's transaction would hold the parent's appends and its rollback undo them. The child forgets
the inherited connection (closing it would end the parent's session) and appends through a session
of its own, opened as the pool opens one, closed by the child.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from eventsourcing import persistence
from psycopg.pq import TransactionStatus

IDLE = TransactionStatus.IDLE

if TYPE_CHECKING:  # the library's pool (eventsourcing[postgres] brings psycopg_pool)
    from psycopg_pool import ConnectionPool


class WriterConnection:
    def __init__(self, pool: ConnectionPool[Any]) -> None:
        """`pool`: the library's (`datastore.pool`), opened already by the store's tables."""
        self._pool = pool
        self._connection: psycopg.Connection[Any] | None = None
        # Several threads of one process may append (the pool let them): one batch at a time.
        self._lock = threading.Lock()
        self._opener = self._owner = os.getpid()  # the pool's process; the connection's

    @contextmanager
    def use(self) -> Iterator[psycopg.Connection[Any]]:
        if os.getpid() != self._owner:
            self._forget_inherited()
        with self._lock:
            try:
                if self._connection is None or self._connection.closed:
                    self._drop()
                    self._connection = self._take()
                yield self._connection
            except psycopg.Error as exc:
                if not self._idle():  # broken, or its transaction not rolled back
                    self._drop()
                raise _in_library_terms(exc) from exc
            except Exception:  # the recorder's own refusal of a reply it read whole: kept
                if not self._idle():  # a harness's own exception cut a statement, as a Ctrl-C
                    self._drop()
                raise
            except BaseException:  # a Ctrl-C mid-statement: its state is unknown
                self._drop()
                raise

    def _idle(self) -> bool:
        """Whether the connection is as it was before the batch: no statement in flight (an
        exception raised by a signal handler leaves the reply unread), no transaction open."""
        connection = self._connection
        return connection is not None and connection.info.transaction_status == IDLE

    def close(self) -> None:
        if os.getpid() != self._owner:
            self._forget_inherited()
        with self._lock:
            self._drop()

    def _forget_inherited(self) -> None:
        """In a forked child: the parent's session is neither used, nor closed, nor given to the
        pool; the lock is new (a thread of the parent may have held it at the fork)."""
        self._connection = None
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def _take(self) -> psycopg.Connection[Any]:
        if self._owner == self._opener:
            return self._pool.getconn()
        # The pool's idle connections here are the parent's sessions: a new one, as the pool makes
        # them (configured: autocommit, the idle-in-transaction timeout).
        return self._pool._connect(self._pool.timeout)

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if self._owner == self._opener:
            self._pool.putconn(connection)
        else:
            connection.close()


def _in_library_terms(exc: psycopg.Error) -> persistence.PersistenceError:
    """The library's error of the same DB-API name (IntegrityError, OperationalError, ...), as its
    own pool raises them."""
    for cls in type(exc).__mro__:
        named = getattr(persistence, cls.__name__, None)
        if isinstance(named, type) and issubclass(named, persistence.PersistenceError):
            return named(str(exc))
    return persistence.PersistenceError(str(exc))
