"""Settings: where the store and the read models live and who is recording, read once from the
environment.

Read only when `Settings.from_env()` is called (never at import), so tests and harnesses can pass
their own.
"""

from __future__ import annotations

import getpass
import hashlib
import math
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def tool_version() -> str:
    from importlib import metadata  # only writers stamp their version: reads skip loading it

    try:
        return f"rollout-lineage {metadata.version('rollout-lineage')}"
    except metadata.PackageNotFoundError:
        return "rollout-lineage (not installed)"


@dataclass(frozen=True)
class Settings:
    home: Path
    store_url: str
    actor: str
    lock_timeout_s: float = 30.0
    duckdb_memory: str = "256MB"
    #: Folders searched for a `.lineage/` when neither --home nor LINEAGE_HOME named one (empty when
    #: one did, or when the search found one), so "no store here" can say where it looked.
    searched: tuple[str, ...] = ()
    #: The store is the `.lineage/` the search found in a parent folder, not here: writers say so.
    found_in_parent: bool = False
    #: A home was named (--home, LINEAGE_HOME): the read models of any store live there.
    home_named: bool = False
    #: Where read models of a server store are cached when no home was named (LINEAGE_CACHE, else
    #: the XDG cache).
    cache: Path | None = None
    #: A signer key file (LINEAGE_SIGNING_KEY): every batch this process appends is signed with it,
    #: and its name is the actor recorded (a name the signature vouches for, unlike LINEAGE_ACTOR).
    signing_key: str | None = None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        store: str | None = None,
        home: str | Path | None = None,
        actor: str | None = None,
        signing_key: str | None = None,
        search: bool = True,
    ) -> Settings:
        """`search=False` (`lineage init`) takes ./.lineage without looking in parent folders."""
        env = os.environ if environ is None else environ
        named = home or env.get("LINEAGE_HOME")
        searched: tuple[str, ...] = ()
        in_parent = False
        if named:
            home_path = Path(named).expanduser().absolute()
        elif not search:
            home_path = Path.cwd() / ".lineage"
        else:  # like git and dvc: the nearest .lineage/ in this folder or a parent
            here = Path.cwd()
            home_path, searched = find_home(here, ceiling_directories(env.get(CEILING_ENV, "")))
            in_parent = home_path.parent != here
        given_url = store or env.get("LINEAGE_STORE")
        url = given_url or f"sqlite:///{home_path / 'events.sqlite'}"
        cache = None
        if not named:  # a folder we happen to stand in is no place for a server store's read models
            xdg = env.get("XDG_CACHE_HOME") or str(Path("~/.cache").expanduser())
            cache = Path(env.get("LINEAGE_CACHE") or Path(xdg) / "rollout-lineage").absolute()
        return cls(
            searched=searched,
            found_in_parent=in_parent and not given_url,
            home_named=bool(named),
            cache=cache,
            home=home_path,
            store_url=url,
            actor=actor or env.get("LINEAGE_ACTOR") or default_actor(),
            lock_timeout_s=_seconds(env.get("LINEAGE_LOCK_TIMEOUT", "30"), "LINEAGE_LOCK_TIMEOUT"),
            duckdb_memory=env.get("LINEAGE_DUCKDB_MEMORY", "256MB"),
            signing_key=signing_key or env.get("LINEAGE_SIGNING_KEY") or None,
        )

    @property
    def store_exists(self) -> bool:
        """Whether there is a store to read: the SQLite file is there (a server store is taken to
        exist)."""
        if not self.store_url.startswith("sqlite:"):
            return True
        from urllib.parse import unquote, urlparse

        parsed = urlparse(self.store_url)
        return Path(
            unquote(parsed.netloc + parsed.path) if parsed.netloc else unquote(parsed.path)
        ).exists()

    @property
    def projections_path(self) -> Path:
        """One DuckDB file of read models per store identity (`store_identity`): in the home when
        one was named, else beside an SQLite store (whatever folder we stand in: never ./.lineage),
        else in the user's cache, so `postgres://` and `postgresql://` spellings of one database,
        from any folder, share one."""
        if self.store_url == f"sqlite:///{self.home / 'events.sqlite'}":
            return self.home / "projections.duckdb"
        identity = store_identity(self.store_url)
        name = f"projections-{hashlib.sha256(identity.encode()).hexdigest()[:12]}.duckdb"
        if self.home_named:
            return self.home / name
        if identity.startswith("sqlite:"):
            store_file = Path(identity.removeprefix("sqlite:"))
            # A store file named as a home holds it (`--store D/events.sqlite` and `--home D` share
            # one).
            if store_file.name == "events.sqlite":
                return store_file.parent / "projections.duckdb"
            return store_file.parent / name
        return (self.cache or self.home) / name


def store_identity(url: str) -> str:
    """The store a URL names, whatever its spelling: scheme `postgres` or `postgresql` (with a
    driver suffix), host case, default port, password and connection options do not make another
    store; a schema does. An SQLite store is its file's absolute path."""
    from urllib.parse import parse_qs, unquote, urlparse

    try:
        parsed = urlparse(url)
    except (
        ValueError
    ):  # an unclosed IPv6 bracket: refused in the store URL's own words, password masked
        from .adapters.store.store_url import StoreURL

        StoreURL.parse(url)
        raise
    scheme = parsed.scheme.split("+", 1)[0]
    if scheme == "sqlite":
        raw = unquote(parsed.netloc + parsed.path) if parsed.netloc else unquote(parsed.path)
        return f"sqlite:{Path(raw).expanduser().absolute()}"
    try:
        port = parsed.port or 5432
    except ValueError:  # StoreURL.parse refuses it with its own words when the store is opened
        return url
    schema = parse_qs(parsed.query).get("schema", [""])[0]
    user = unquote(parsed.username or "")
    host = (parsed.hostname or "").lower()
    return f"postgresql://{user}@{host}:{port}/{parsed.path.strip('/')}?schema={schema}"


def _seconds(text: str, name: str) -> float:
    from .domain.errors import InvalidInput

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 0 <= value <= 86_400):
        raise InvalidInput(f"{name}: expected seconds between 0 and 86400, found {text!r}")
    return value


#: Colon-separated absolute folders the search for a `.lineage/` does not go up into (as
#: GIT_CEILING_DIRECTORIES).
CEILING_ENV = "LINEAGE_CEILING_DIRECTORIES"


def ceiling_directories(text: str) -> frozenset[Path]:
    """The folders of LINEAGE_CEILING_DIRECTORIES, symbolic links resolved as the working folder's
    are. A relative entry is refused, not skipped as git does: a search that silently crossed it
    could open another's store."""
    from .domain.errors import InvalidInput

    folders = set()
    for entry in text.split(os.pathsep):
        if not entry:
            continue
        if not os.path.isabs(entry):
            raise InvalidInput(
                f"{CEILING_ENV}: expected absolute folders "
                f"separated by {os.pathsep!r}, found {entry!r}",
                hint="write the folder as an absolute path, e.g. /home/me",
            )
        folders.add(Path(os.path.realpath(entry)))
    return frozenset(folders)


def find_home(start: Path, ceilings: frozenset[Path] = frozenset()) -> tuple[Path, tuple[str, ...]]:
    """The nearest `.lineage/` from `start` up (and the folders searched), else `start/.lineage`
    (not there yet).

    As git does: `start` itself is always looked at, and the search does not go up into a ceiling
    folder."""
    searched = []
    for folder in (start, *start.parents):
        if folder != start and folder in ceilings:
            break
        candidate = folder / ".lineage"
        if candidate.is_dir():
            return candidate.absolute(), ()
        searched.append(str(folder))
    return (start / ".lineage").absolute(), tuple(searched)
