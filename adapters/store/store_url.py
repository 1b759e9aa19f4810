"""Where the event store is: a URL (`sqlite:///path` or `postgresql://user@host/db`) and the
eventsourcing settings it stands for.

Apart from the recorders in `event_store`, so that naming a store (every command does) loads no
database driver.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from ...domain.errors import InvalidInput

#: The module holding the chained recorders, which eventsourcing loads by topic.
PACKAGE = __name__.rpartition(".")[0]
RECORDERS = PACKAGE + ".event_store"


def _redact(url: str) -> str:
    """A URL for a message, its passwords masked even when it is malformed: whatever stands between
    `//user:` and the last `@` (a password may hold `/`, `#`, `?` or `@`), and any `password=`
    option."""
    masked = re.sub(r"(//[^/@:]*:).*@", r"\1***@", url)
    return re.sub(r"(?i)([?&]password=)[^&]*", r"\1***", masked)


def may_write(path: Path) -> bool:
    """Whether this process may write `path` and a new file beside it (a WAL, a journal), in the
    nearest folder that exists if `path`'s does not yet: false on a read-only mount even for
    root."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


@dataclass(frozen=True)
class StoreURL:
    kind: str  # "sqlite" | "postgresql"
    url: str
    sqlite_path: Path | None = None

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        try:
            parsed = urlparse(url)
            parsed.port  # noqa: B018 -- raises for a port out of range or not a number
        except (
            ValueError
        ):  # the parser's own words may quote the password (a '#' in it ends the host)
            raise InvalidInput(
                f"expected a store URL such as "
                f"postgresql://USER@HOST:5432/DB, found {_redact(url)!r}: its "
                "host or port does not parse",
                hint="check the host and port; percent-encode a password holding : / ? # [ ] @",
            ) from None
        if parsed.scheme == "sqlite":
            raw = unquote(parsed.netloc + parsed.path) if parsed.netloc else unquote(parsed.path)
            if not raw:
                raise InvalidInput(
                    f"expected sqlite:///PATH, found {_redact(url)!r}",
                    hint="e.g. sqlite:///home/me/.lineage/events.sqlite",
                )
            return cls("sqlite", url, Path(raw))
        if parsed.scheme in ("postgresql", "postgres"):
            if not parsed.hostname or not parsed.path.strip("/"):
                raise InvalidInput(
                    f"expected postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE, "
                    f"found {_redact(url)!r}"
                )
            return cls("postgresql", url)
        raise InvalidInput(
            f"expected a store URL starting sqlite:/// or postgresql://, found {_redact(url)!r}",
            hint="set --store or LINEAGE_STORE",
        )

    def redacted(self) -> str:
        return _redact(self.url)

    def application_env(self) -> dict[str, str]:
        if self.kind == "sqlite":
            assert self.sqlite_path is not None
            self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            return {
                "PERSISTENCE_MODULE": f"{PACKAGE}.sqlite_connections:StatementCachingSQLiteFactory",
                "SQLITE_DBNAME": str(self.sqlite_path),
                "SQLITE_LOCK_TIMEOUT": "60",
                "APPLICATION_RECORDER_TOPIC": f"{RECORDERS}:ChainedSQLiteRecorder",
            }
        parsed = urlparse(self.url)
        query = parse_qs(parsed.query)
        env = {
            "PERSISTENCE_MODULE": f"{PACKAGE}.postgres_store:ChainedPostgresFactory",
            "POSTGRES_DBNAME": parsed.path.strip("/"),
            "POSTGRES_HOST": parsed.hostname or "localhost",
            "POSTGRES_PORT": str(parsed.port or 5432),
            "POSTGRES_USER": unquote(parsed.username or ""),
            "POSTGRES_PASSWORD": unquote(parsed.password or ""),
            "POSTGRES_CONNECT_TIMEOUT": query.get("connect_timeout", ["10"])[0],
            "POSTGRES_LOCK_TIMEOUT": "30",
            "POSTGRES_POOL_SIZE": "1",
            "APPLICATION_RECORDER_TOPIC": f"{PACKAGE}.postgres_store:ChainedPostgresRecorder",
        }
        if "schema" in query:
            env["POSTGRES_SCHEMA"] = query["schema"][0]
        return env
