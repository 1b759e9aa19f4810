"""The one module that talks to a Docker engine, through the docker SDK. Every SDK exception is
translated here, so no caller ever catches a docker type; the SDK is imported only on first use;
tars move as streams, and a partial tar never carries the final name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollout_lineage.domain.errors import InvalidInput, LineageError, StoreUnavailable

_DEFAULT_TIMEOUT_S = (
    600  # benchflow's timeout per docker call; `docker save` of a large image takes minutes
)


class DockerEngineError(LineageError):
    """The engine was reached but refused or failed a request (unknown container, image in use, bad
    tar)."""


@dataclass(frozen=True)
class LoadedImage:
    image_id: str
    tags: tuple[str, ...]


class DockerEngine:
    """A lazily connected Docker engine; `base_url=None` means the environment's (DOCKER_HOST or the
    socket).

    `client` takes an already built SDK client (tests pass a fake); otherwise one is built on first
    use.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        timeout_s: int = _DEFAULT_TIMEOUT_S,
        client: Any = None,
    ) -> None:
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._client = client

    @property
    def _docker(self) -> Any:
        if self._client is None:
            with self._errors("connect"):
                # Deferred to first use: importing `docker` alone costs a quarter of a second,
                # and most `lineage` commands never touch an engine.
                import docker

                self._client = (
                    docker.DockerClient(base_url=self._base_url, timeout=self._timeout_s)
                    if self._base_url
                    else docker.from_env(timeout=self._timeout_s)
                )
        return self._client

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Every SDK and `requests`/`urllib3` exception as ours: an engine that cannot be reached,
        or that fails (a 5xx), is `StoreUnavailable`; one that refuses a request is
        `DockerEngineError`."""
        import docker.errors
        import requests.exceptions
        import urllib3.exceptions

        where = self._base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            yield
        except docker.errors.APIError as exc:
            # the engine is failing, not refusing
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailable(
                    f"The Docker engine at {where} failed to {action} "
                    f"({exc.status_code}: {exc.explanation or exc}); "
                    "expected a working engine.",
                    hint="check the engine (docker info, its "
                    "logs), then retry; nothing was recorded",
                ) from exc
            raise DockerEngineError(
                f"The Docker engine at {where} refused to {action}: {exc.explanation or exc}.",
                hint="check the reference or container named",
            ) from exc
        except docker.errors.ImageLoadError as exc:
            raise DockerEngineError(
                f"The Docker engine at {where} could not {action}: {exc}; expected a tar "
                "written by `docker save`.",
                hint="verify the tar with `lineage snapshots verify`",
            ) from exc
        except (
            docker.errors.DockerException,
            requests.exceptions.RequestException,
            urllib3.exceptions.HTTPError,
        ) as exc:  # `image.save()` streams through urllib3 unwrapped
            raise StoreUnavailable(
                f"Cannot reach the Docker engine at {where} to {action} ({exc}); expected a "
                "running engine.",
                hint="start dockerd or set DOCKER_HOST, then retry",
            ) from exc

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def ping(self) -> bool:
        with self._errors("ping it"):
            return bool(self._docker.ping())

    def identity(self) -> str:
        """`docker info`'s name and id, as "<name> (<id>)": which engine an image was loaded
        into."""
        with self._errors("describe itself (docker info)"):
            info = self._docker.info()
        return f"{info.get('Name') or 'docker'} ({info.get('ID') or 'no id'})"

    def image_id(self, ref: str) -> str | None:
        """The `sha256:<hex>` id `ref` resolves to, or None when the engine has no such image."""
        import docker.errors

        with self._errors(f"inspect image {ref!r}"):
            try:
                return self._docker.images.get(ref).id
            except docker.errors.ImageNotFound:
                return None

    def list_image_ids(self) -> set[str]:
        with self._errors("list images"):
            return set(self._docker.api.images(all=True, quiet=True))

    def load_tar(self, path: str | os.PathLike[str]) -> list[LoadedImage]:
        """`docker load` the tar at `path`, streamed from disk; returns the images it loaded."""
        try:
            tar = open(path, "rb")  # noqa: SIM115 -- closed below, after the engine has read it all
        except OSError as exc:
            raise InvalidInput(
                f"Cannot open snapshot tar {os.fspath(path)!r}: {exc.strerror or exc}; expected a "
                "readable file.",
                hint="check the path and its permissions",
            ) from exc
        with tar, self._errors(f"load {os.fspath(path)!r}"):
            # requests streams a file object; it is never read whole
            images = self._docker.images.load(tar)
        loaded = {image.id: LoadedImage(image.id, tuple(image.tags)) for image in images}
        return list(loaded.values())

    def save_to(
        self, ref: str, dest_dir: str | os.PathLike[str], file_name: str
    ) -> tuple[Path, str, int]:
        """`docker save` `ref` to `dest_dir/file_name` atomically; returns (path, "sha256:<hex>" of
        the tar, size). The export is hashed while it is written, never held in memory, into a
        temporary file renamed into place, so a partial tar never carries the final name."""
        if not file_name or file_name in (".", "..") or "/" in file_name or os.sep in file_name:
            raise InvalidInput(
                f"Snapshot file name {file_name!r} is not a "
                f"plain file name; expected a name without "
                "directories, such as the one benchflow derives from the sandbox ref."
            )
        final = Path(dest_dir) / file_name
        with self._errors(f"look up image {ref!r}"):
            image = self._docker.images.get(ref)
        # keep RepoTags as docker
        named = next((tag for tag in (ref, f"{ref}:latest") if tag in image.tags), False)
        digest, size = hashlib.sha256(), 0
        try:
            partial = tempfile.NamedTemporaryFile(  # noqa: SIM115 (renamed into place or removed below)
                dir=final.parent, prefix=f".{file_name}.", suffix=".partial", delete=False
            )
            try:
                with partial, self._errors(f"save image {ref!r}"):
                    for chunk in image.save(chunk_size=1 << 20, named=named):
                        partial.write(chunk)
                        digest.update(chunk)
                        size += len(chunk)
                    partial.flush()
                    # the rename below must never publish bytes still in the page cache
                    os.fsync(partial.fileno())
                os.replace(partial.name, final)
            except BaseException:
                Path(partial.name).unlink(missing_ok=True)
                raise
            fsync_directory(final.parent)
        except OSError as exc:
            raise InvalidInput(
                f"Cannot write snapshot tar {os.fspath(final)!r}: "
                f"{exc.strerror or exc}; expected a "
                "writable directory with room for the image.",
                hint="check dest_dir and free space",
            ) from exc
        return final, "sha256:" + digest.hexdigest(), size

    def remove_image(self, ref: str, *, force: bool = False) -> bool:
        """Remove `ref`; False when the engine had no such image (removal is idempotent)."""
        import docker.errors

        with self._errors(f"remove image {ref!r}"):
            try:
                self._docker.images.remove(ref, force=force)
            except docker.errors.ImageNotFound:
                return False
        return True

    def commit(self, container: str, repository: str, tag: str) -> str:
        """`docker commit` a container into `repository:tag`; returns the new image id."""
        with self._errors(f"commit container {container!r} as {repository}:{tag}"):
            return self._docker.containers.get(container).commit(repository=repository, tag=tag).id


def fsync_directory(directory: Path) -> None:
    """Make the rename itself durable, so after a crash the tar is either absent or complete under
    its name."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
