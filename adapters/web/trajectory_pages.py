"""The trajectory timeline pages of `lineage serve` (issue #36): `/trajectory/RUN?node=&file=&page=
&line=`, and the link from every audit finding that names a trajectory line to that line.

The page's document comes from the `Reads` port (`projections/reports/trajectory.py`): the file is
shown only while it has the SHA-256 recorded at import; otherwise the page says why and shows what
the log recorded. Every value is text in an autoescaped template; the page has no script."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...domain.errors import LineageError

#: "trajectory/llm_trajectory.jsonl:12" (or the bare file name) in a finding's message.
WHERE = re.compile(r"((?:trajectory/)?(acp|llm)_trajectory\.jsonl|agent/trajectory\.json):(\d+)")
FILE_NAMES = ("acp", "llm", "atif")
PARAMS = frozenset(("node", "file", "page", "line", "token"))


class BadTrajectoryParameter(LineageError):
    """A query parameter of the trajectory page that is not what it should be."""


def trajectory_path(run: str, node: str = "root", **more: Any) -> str:
    """The page's address: the run id with its slashes kept (encoded when a part is `.` or `..`)."""
    parts = run.split("/")
    path = quote(run, safe="" if any(p in (".", "..") for p in parts) else "/")
    query = {"node": node, **{k: v for k, v in more.items() if v is not None}}
    anchor = f"#L{more['line']}" if more.get("line") else ""
    return f"/trajectory/{path}?{urlencode(query)}{anchor}"


def evidence_href(finding: Any) -> str:
    """The trajectory line an audit finding names ("" when it names none, or no run)."""
    if not isinstance(finding, dict) or not finding.get("run"):
        return ""
    found = WHERE.search(str(finding.get("message") or ""))
    if not found:
        return ""
    name = found.group(2) or "atif"
    return trajectory_path(
        str(finding["run"]), str(finding.get("node") or "root"), file=name, line=found.group(3)
    )


def observation_href(run: str, node: str, file: str, line: int | None) -> str:
    """The trajectory line a recorded observation names ("" for a file that is no trajectory)."""
    name = next((n for n in FILE_NAMES if file.endswith(_PATHS[n])), None)
    if name is None or not line:
        return ""
    return trajectory_path(run, node, file=name, line=line)


_PATHS = {
    "acp": "acp_trajectory.jsonl",
    "llm": "llm_trajectory.jsonl",
    "atif": "agent/trajectory.json",
}


def _number(request: Request, name: str) -> int | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or int(text) < 1:
        raise BadTrajectoryParameter(
            f"expected {name} to be a whole number from 1 to 999999999, found {text!r}"
        )
    return int(text)


def trajectory_routes(
    reads: Any,
    page: Callable[..., Response],
    html_errors: Callable[[Callable[[Request], Response]], Callable[[Request], Response]],
) -> list[Route]:
    def trajectory_page(request: Request) -> Response:
        unknown = sorted(set(request.query_params) - PARAMS)
        if unknown:
            raise BadTrajectoryParameter(
                f"expected query parameters among file, line, node, page, found "
                f"{', '.join(unknown)}"
            )
        node = request.query_params.get("node") or "root"
        file = request.query_params.get("file") or None
        if file is not None and file not in FILE_NAMES:
            raise BadTrajectoryParameter(
                f"expected file to be one of {', '.join(FILE_NAMES)}, found {file!r}"
            )
        doc = reads.trajectory(
            request.path_params["run"],
            node,
            file,
            _number(request, "page"),
            _number(request, "line"),
        )

        def link(**changes: Any) -> str:
            node = changes.pop("node", doc.node)
            chosen = {"file": doc.file.name if doc.file else None, "page": doc.page, **changes}
            return trajectory_path(doc.run, node, **chosen)

        def href(observation: Any) -> str:
            return observation_href(doc.run, doc.node, observation.file, observation.line)

        shown = doc.file.path if doc.file else None
        marks: dict[int, list[Any]] = {}
        for observation in doc.observations:
            if shown and observation.line and observation.file == shown:
                marks.setdefault(observation.line, []).append(observation)
        return page(
            "trajectory.html",
            doc=doc,
            link=link,
            href=href,
            marks=marks,
            position=reads.position,
        )

    return [Route("/trajectory/{run:path}", html_errors(trajectory_page))]
