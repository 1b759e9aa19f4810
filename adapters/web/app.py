"""`lineage serve`'s HTTP adapter: a Starlette application over the read side, with no way to write.
Safe by default, since a page of the log holds names anyone could have recorded. What is read comes
through the `Reads` port, so this module knows HTTP, not SQL.
"""

from __future__ import annotations

import csv
import hmac
import io
import ipaddress
import json
import math
import socket
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlencode
from uuid import UUID

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...domain.errors import LineageError, UnknownSubject
from . import chart_svg
from .trajectory_pages import evidence_href, trajectory_routes

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
READ_METHODS = frozenset({"GET", "HEAD"})
TOKEN_COOKIE = "lineage_token"
#: Only this server's own style sheets; no script, no frame, no plugin, forms submit only here.
CSP = (
    "default-src 'self'; script-src 'none'; object-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'; img-src 'self' data:"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
PAGE_SIZE = 50
#: What the SQL page shows of an answer, in bytes of its cells as the page escapes them: a table a
#: browser can hold, and what the page holds while it is made (escaping can make text six times
#: longer); its downloads carry up to the answer's own cap.
SQL_PAGE_BYTES = 2 * 2**20
#: About what a streamed SQL answer sends at a time.
SEND_BYTES = 64 * 1024
#: What the end of an SQL answer's JSON may take (whether and why it was cut, or the error that cut
#: it), kept aside under its byte cap.
TAIL_BYTES = 2048
#: The arms x tests rows a run page shows (a search tree can have thousands; the arms page shows
#: them all).
ARMS_SHOWN = 200
#: What a runs page takes besides its filters (`q`: a part of the run, task, agent or model).
RUNS_PARAMS = ("q", "since", "sort", "page", "token")


def run_path(run: str) -> str:
    """A run id as the rest of a `/runs/...` URL: its slashes kept, unless a part of it is `.` or
    `..`, which a browser would resolve away (`a/../b` is `b`): then every slash is encoded too."""
    parts = run.split("/")
    return quote(run, safe="" if any(p in (".", "..") for p in parts) else "/")


class SQLRows(Protocol):
    """A users' query as it is read (`served_reads.SQLAnswer`): iterate its rows, then close it
    (closing gives its connection back; a reader that stops early must close it)."""

    columns: list[str]
    position: int

    def __iter__(self) -> Iterator[tuple[Any, ...]]: ...

    def close(self) -> None: ...


class Reads(Protocol):
    """What the web pages and the API read (implemented by
    `projections.served_reads.ServedReads`)."""

    filters: tuple[str, ...]
    sorts: tuple[str, ...]
    sql_row_limit: int
    tree_style: str
    stats_columns: tuple[str, ...]
    chart_columns: tuple[str, ...]

    @property
    def position(self) -> int: ...

    def runs(
        self, filters: dict[str, str | None], since: str | None, sort: str, page: int, size: int
    ) -> Any: ...

    def facets(self) -> dict[str, list[str]]: ...

    def run(self, given: str) -> tuple[Any, str, dict[str, str]]: ...

    def compare(self, a: str, b: str) -> dict[str, Any]: ...

    def branches(self, given: str) -> dict[str, Any]: ...

    def audit(self) -> dict[str, Any]: ...

    def charts(self, group: str | None) -> Any: ...

    def arms(self, given: str, baseline: str | None, every_task: bool) -> dict[str, Any]: ...

    def compare_stats(self, document: dict[str, Any]) -> dict[str, Any]: ...

    def rounded(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def head(self) -> str | None: ...

    @property
    def sql_answer_bytes(self) -> int: ...

    def trajectory(
        self, given: str, node: str, file: str | None, page: int | None, line: int | None
    ) -> Any: ...

    def sql(self, query: str) -> SQLRows: ...

    def escape(self, value: Any) -> str:
        """A value as page text: HTML-escaped, quotes too, and invisible control or format
        characters (a right-to-left override) shown as escapes, as `lineage report` shows them."""
        ...


def is_loopback(host: str) -> bool:
    """Whether `host` resolves, and to loopback addresses only. Any other bind needs a token
    (`cli/serve_cmds.py` refuses to start without one). Decided from the addresses, never from how
    the name is spelt: `127.lab.example` is a name like any other, and a name that also resolves to
    another address, or not at all, is not loopback."""
    return all_loopback(addresses_of(host))


def addresses_of(host: str, port: int | None = None) -> list[tuple[Any, ...]]:
    """What `host` resolves to for a TCP listener (`socket.getaddrinfo`'s tuples), or [] when it
    does not resolve. `[::1]` is `::1`."""
    try:
        return socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []


def all_loopback(found: Iterable[tuple[Any, ...]]) -> bool:
    """At least one address, and every one loopback (127.0.0.0/8, ::1, or ::ffff:127.x.y.z)."""
    addresses = [info[4][0] for info in found]
    return bool(addresses) and all(_loopback_address(a) for a in addresses)


def _loopback_address(text: str) -> bool:
    try:
        address = ipaddress.ip_address(str(text).split("%", 1)[0])  # an IPv6 scope: fe80::1%eth0
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def json_value(value: Any) -> Any:
    """A read-model value as JSON: times in ISO 8601 (UTC with `Z`), exact numbers as numbers, bytes
    as hex; a float that JSON cannot hold (NaN, infinity) as text, never as invalid JSON."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    if isinstance(value, (date, time, UUID)):
        return value.isoformat() if not isinstance(value, UUID) else str(value)
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_value(v) for v in value]
    return str(value)


def _text(value: Any) -> str:
    """A value as one cell of text on a page or in CSV (missing: nothing)."""
    shown = json_value(value)
    if shown is None:
        return ""
    if isinstance(shown, bool):
        return "true" if shown else "false"
    if isinstance(shown, (dict, list)):
        return json.dumps(shown, ensure_ascii=False, sort_keys=True)
    return str(shown)


def _templates(escape: Callable[[Any], str]) -> Environment:
    """Every `{{ value }}` passes through `escape` (autoescape stays on beneath it): only our own
    markup, the tree drawn by `lineage report`'s renderer, is passed as `Markup`."""

    def finalize(value: Any) -> Any:
        return value if isinstance(value, Markup) else Markup(escape(value))

    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=finalize,
    )
    env.filters["text"] = _text
    env.filters["run_path"] = run_path
    env.filters["evidence_href"] = evidence_href
    return env


class Guard(BaseHTTPMiddleware):
    """Every request: a read method, the token where one is required, and the security headers on
    the answer.

    Only GET and HEAD exist: every other method is 405 before any route runs. The token is checked
    in constant time on every request; a page visited with `?token=` gets an HttpOnly cookie, so
    its links work. The Host header is checked beneath this (`TrustedHostMiddleware`, the names
    `cli/serve_cmds.allowed_hosts` gives): on a loopback bind it must name loopback, so a page
    elsewhere cannot rebind its own name to 127.0.0.1 and read the answers; on a wider bind any
    name passes and the token guards."""

    def __init__(self, app: Any, token: str | None) -> None:
        super().__init__(app)
        self.token = token

    def _token_given(self, request: Request) -> tuple[bool, bool]:
        """(whether the request carries the token, whether it came in the query string)."""
        assert self.token is not None
        given = request.headers.get("authorization", "")
        candidates = [
            (given.removeprefix("Bearer ").strip(), False) if given.startswith("Bearer ") else None,
            (request.cookies.get(TOKEN_COOKIE, ""), False),
            (request.query_params.get("token", ""), True),
        ]
        for candidate in candidates:
            if (
                candidate
                and candidate[0]
                and hmac.compare_digest(candidate[0].encode(), self.token.encode())
            ):
                return True, candidate[1]
        return False, False

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.method not in READ_METHODS:
            response: Response = JSONResponse(
                {"error": f"expected GET, found {request.method}: lineage serve only reads"},
                status_code=405,
                headers={"allow": "GET, HEAD"},
            )
        elif self.token is not None and not (given := self._token_given(request))[0]:
            response = JSONResponse(
                {
                    "error": "expected the server's token, found none or another",
                    "hint": "send `Authorization: Bearer TOKEN`, "
                    "or open a page once with ?token=TOKEN",
                },
                status_code=401,
                headers={"www-authenticate": "Bearer"},
            )
        elif self.token is not None and given[1] and not request.url.path.startswith("/api"):
            # A page visited with ?token=: the cookie from now on, and the address without the token
            # (it would stay in the history and the address bar).
            kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            response = RedirectResponse(
                own_path(request) + ("?" + urlencode(kept) if kept else ""), status_code=303
            )
            response.set_cookie(
                TOKEN_COOKIE, self.token, httponly=True, samesite="strict", path="/"
            )
        else:
            response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response


#: What a path keeps unescaped when it is sent back as a link: RFC 3986's unreserved characters
#: (`quote` keeps letters, digits and `_.-~`), `/`, `%` (the escapes it came with stay as they were)
#: and the sub-delimiters. A backslash, a space, a control character or a non-ASCII one is escaped.
PATH_SAFE = "/%:@!$&'()*+,;="


def own_path(request: Request) -> str:
    """The path of `request` as a link to this server: as the client sent it, so an escaped `%2F`
    stays inside its segment (and a run id with `..` in it stays that run's), with what a browser
    would read otherwise escaped (a backslash is a slash to it), and one leading slash only. Two
    (`//evil.example/x`) make a browser leave for that host, so the only redirect this server
    answers (after a `?token=` visit) goes nowhere else."""
    raw = request.scope.get("raw_path")
    sent = raw.decode("latin-1") if raw else quote(request.url.path, safe="/")
    return "/" + quote(sent, safe=PATH_SAFE).lstrip("/")


class CappedRows:
    """An SQL answer's rows as sent, in one place for its JSON, its CSV and its page: until its
    end, `row_limit` rows, or `byte_limit` bytes as `encode` makes each (what the answer holds
    before its rows counts too: `spent`). `cut` says why it stopped early (None: it did not),
    `error` what failed after rows were sent. The answer is closed at the end, however it ends."""

    def __init__(self, answer: SQLRows, row_limit: int, byte_limit: int, spent: int) -> None:
        self.answer = answer
        self.row_limit = row_limit
        self.byte_limit = byte_limit
        self.spent = spent
        self.rows = 0
        self.cut: str | None = None
        self.error: LineageError | None = None

    def encoded(
        self, encode: Callable[[tuple[Any, ...]], bytes]
    ) -> Iterator[tuple[tuple[Any, ...], bytes]]:
        try:
            for row in self.answer:
                if self.rows == self.row_limit:
                    self.cut = (
                        f"the answer has more than {self.row_limit} rows: these are the first "
                        f"{self.row_limit}"
                    )
                    return
                piece = encode(row)
                if self.spent + len(piece) > self.byte_limit:
                    self.cut = (
                        f"the answer reached its cap of {self.byte_limit} bytes after "
                        f"{self.rows} rows: ask for fewer or smaller rows (LIMIT, fewer columns)"
                    )
                    return
                self.spent += len(piece)
                self.rows += 1
                yield row, piece
        except LineageError as exc:
            self.error = exc
            self.cut = f"the query failed after {self.rows} rows: {exc.message}"
        finally:
            self.answer.close()


def _json_bytes(value: Any) -> bytes:
    """As Starlette's JSONResponse encodes (compact, UTF-8, never NaN)."""
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode()


def _json_rows(columns: list[str]) -> Callable[[tuple[Any, ...]], bytes]:
    """Each row as a JSON object of its columns, after the first with the comma before it."""
    first = [True]

    def encode(row: tuple[Any, ...]) -> bytes:
        piece = _json_bytes(dict(zip(columns, json_value(list(row)), strict=True)))
        comma, first[0] = (b"" if first[0] else b","), False
        return comma + piece

    return encode


def _csv_line(cells: Iterable[Any]) -> bytes:
    out = io.StringIO()
    csv.writer(out).writerow([_text(v) for v in cells])
    return out.getvalue().encode()


def _status(exc: LineageError) -> int:
    if isinstance(exc, UnknownSubject):
        return 404
    # 3: the log fails its evidence (a broken chain), 4: a read limit or the store: nothing to show
    # now.
    return 503 if exc.exit_code in (3, 4) else 400


def _error_document(exc: LineageError) -> dict[str, Any]:
    return {"error": exc.message, "hint": exc.hint}


def _error_headers(exc: LineageError) -> dict[str, str] | None:
    """A refusal to be asked again later (too many queries at once) says when: Retry-After."""
    retry_after = getattr(exc, "retry_after", None)
    return None if retry_after is None else {"retry-after": str(retry_after)}


def _page_number(request: Request) -> int:
    text = request.query_params.get("page", "1")
    # ASCII digits only ("²" is a digit to str.isdigit, not to int), and few enough for an OFFSET
    if not (text.isascii() and text.isdigit() and len(text) <= 9) or int(text) < 1:
        raise BadParameter(
            f"expected page to be a whole number from 1 to 999999999, found {text!r}"
        )
    return int(text)


class BadParameter(LineageError):
    """A query parameter of the HTTP API that is not what it should be."""


class ShortOfMemory(LineageError):
    """An answer the process had no memory for: while users' queries run, the whole process works
    under their memory bound (`statement_limits.memory_bounded`), pages too."""

    exit_code = 4


def _short_of_memory() -> ShortOfMemory:
    return ShortOfMemory(
        "expected memory for this answer, found the server at its bound: users' SQL queries "
        "running now hold it",
        hint="ask again once they end (each within its timeout)",
    )


def build_app(reads: Reads, *, token: str | None, allowed_hosts: list[str]) -> Starlette:
    """The application: HTML pages for people, `/api/...` JSON for programs, `/static` for the
    style."""
    env = _templates(reads.escape)

    def page(
        name: str, status: int = 200, headers: dict[str, str] | None = None, **context: Any
    ) -> HTMLResponse:
        return HTMLResponse(
            env.get_template(name).render(**context), status_code=status, headers=headers
        )

    def runs_query(request: Request) -> tuple[dict[str, str | None], str | None, str, int]:
        params = request.query_params
        known = {*reads.filters, *RUNS_PARAMS}
        unknown = sorted(set(params) - known)
        if unknown:  # a misspelt filter would otherwise show every run as if it matched
            raise BadParameter(
                f"expected query parameters among "
                f"{', '.join(sorted(known))}, found {', '.join(unknown)}"
            )
        filters = {name: params.get(name) or None for name in reads.filters}
        if params.get("q"):
            filters["search"] = params["q"]
        return (
            filters,
            params.get("since") or None,
            params.get("sort") or "-registered",
            (_page_number(request)),
        )

    Handler = Callable[[Request], Response]

    def answering_errors(
        render: Callable[[LineageError], Response],
    ) -> Callable[[Handler], Handler]:
        """A handler whose refusals (a memory cap reached included) are answered by `render`: one
        rule for the pages and the API, each in its own form."""

        def decorate(handler: Handler) -> Handler:
            def wrapped(request: Request) -> Response:
                try:
                    try:
                        return handler(request)
                    except MemoryError:
                        raise _short_of_memory() from None
                except LineageError as exc:
                    return render(exc)

            return wrapped

        return decorate

    html_errors = answering_errors(
        lambda exc: page(
            "error.html",
            _status(exc),
            headers=_error_headers(exc),
            error=exc.message,
            hint=exc.hint,
        )
    )
    api_errors = answering_errors(
        lambda exc: JSONResponse(
            _error_document(exc), status_code=_status(exc), headers=_error_headers(exc)
        )
    )

    def runs_page(request: Request) -> Response:
        filters, since, sort, number = runs_query(request)
        found = reads.runs(filters, since, sort, number, PAGE_SIZE)
        chosen = {k: v for k, v in request.query_params.items() if k not in ("page", "token")}

        def link(**changes: Any) -> str:
            return "?" + urlencode({**chosen, **changes})

        return page(
            "runs.html",
            found=found,
            facets=reads.facets(),
            chosen=chosen,
            sorts=reads.sorts,
            link=link,
            position=reads.position,
        )

    def run_page(request: Request) -> Response:
        report, svg, ids = reads.run(request.path_params["run"])
        return page(
            "run.html",
            report=report,
            tree=Markup(svg),
            ids=ids,
            position=reads.position,
            arms_rows=report.arms.rows[:ARMS_SHOWN],
            arms_more=max(0, len(report.arms.rows) - ARMS_SHOWN),
            stats=report.arm_stats,
            stats_rows=reads.rounded(report.arm_stats.rows) if report.arm_stats else [],
            stats_columns=reads.stats_columns,
        )

    def compare_page(request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        document = reads.compare(a, b) if a and b else None
        found = reads.compare_stats(document) if document else {"stats": None}
        return page(
            "compare.html",
            a=a,
            b=b,
            diff=document,
            stats=found["stats"],
            stats_error=found.get("stats_error"),
            stats_rows=reads.rounded(found["stats"].rows) if found["stats"] else [],
            stats_columns=reads.stats_columns,
        )

    def arms_query(request: Request) -> tuple[str, str | None, bool]:
        params = request.query_params
        unknown = sorted(set(params) - {"baseline", "all_tasks", "token"})
        if unknown:
            raise BadParameter(
                f"expected query parameters among all_tasks, baseline, found {', '.join(unknown)}"
            )
        every = params.get("all_tasks", "")
        if every not in ("", "0", "1"):
            raise BadParameter(f"expected all_tasks=1 or all_tasks=0, found {every!r}")
        return request.path_params["run"], params.get("baseline") or None, every == "1"

    def arms_page(request: Request) -> Response:
        given, baseline, every = arms_query(request)
        found = reads.arms(given, baseline, every)
        return page(
            "arms.html",
            found=found,
            table=found["table"],
            stats=found["stats"],
            stats_error=found.get("stats_error"),
            stats_rows=reads.rounded(found["stats"].rows) if found["stats"] else [],
            stats_columns=reads.stats_columns,
            baseline=baseline or "",
            every=every,
            position=reads.position,
        )

    def api_arms(request: Request) -> Response:
        given, baseline, every = arms_query(request)
        found = reads.arms(given, baseline, every)
        table, table_stats = found["table"], found["stats"]
        return JSONResponse(
            json_value(
                {
                    "position": reads.position,
                    "run": found["run"],
                    "fork": found["fork"],
                    "arms": {
                        "baseline": table.baseline,
                        "columns": list(table.columns),
                        "rows": table.rows,
                        "differing": table.differing,
                    },
                    "stats": None
                    if table_stats is None
                    else {
                        "title": table_stats.title,
                        "baseline": table_stats.baseline,
                        "task": table_stats.task,
                        "runs": table_stats.runs,
                        "rows": table_stats.rows,
                    },
                    "stats_error": found.get("stats_error"),
                }
            )
        )

    def charts_group(request: Request) -> str | None:
        unknown = sorted(set(request.query_params) - {"group", "token"})
        if unknown:
            raise BadParameter(f"expected query parameters among group, found {', '.join(unknown)}")
        return request.query_params.get("group") or None

    def charts_page(request: Request) -> Response:
        found = reads.charts(charts_group(request))
        return page(
            "charts.html",
            charts=found,
            pass_chart=chart_svg.interval_chart(
                found.arms, "pass_rate", "pass_low", "pass_high", (0.0, 1.0)
            ),
            reward_chart=chart_svg.interval_chart(
                found.arms,
                "mean_reward",
                "reward_low",
                "reward_high",
                chart_svg.reward_axis(found.arms),
            ),
            grid=chart_svg.grid_chart(found.grid),
            time=chart_svg.timeline_charts(found.timeline),
            rounded=reads.rounded(found.arms),
            summary=reads.chart_columns,
            position=reads.position,
        )

    def api_charts(request: Request) -> Response:
        found = reads.charts(charts_group(request))
        return JSONResponse(json_value({"position": reads.position, **vars(found)}))

    def capped(answer: SQLRows, spent: int = 0) -> CappedRows:
        return CappedRows(answer, reads.sql_row_limit, reads.sql_answer_bytes, spent)

    def sql_page(request: Request) -> Response:
        query = request.query_params.get("q", "")
        limits: dict[str, Any] = {
            "limit": reads.sql_row_limit,
            "byte_limit": reads.sql_answer_bytes,
            "page_bytes": min(SQL_PAGE_BYTES, reads.sql_answer_bytes),
        }
        if not query:
            return page("sql.html", query="", columns=None, **limits)

        def cells(row: tuple[Any, ...]) -> bytes:  # as the page shows them
            return "".join(f"<td>{reads.escape(_text(v))}</td>" for v in row).encode()

        try:
            answer = reads.sql(query)
            rows = CappedRows(answer, reads.sql_row_limit, limits["page_bytes"], 0)
            shown = [row for row, _ in rows.encoded(cells)]
            if rows.error is not None:
                raise rows.error
        except LineageError as exc:
            return page(
                "sql.html",
                _status(exc),
                headers=_error_headers(exc),
                query=query,
                columns=None,
                error=exc.message,
                hint=exc.hint,
                **limits,
            )
        return page(
            "sql.html",
            query=query,
            columns=answer.columns,
            rows=shown,
            cut=rows.cut,
            download=urlencode({"q": query}),
            **limits,
        )

    def audit_page(request: Request) -> Response:
        return page("audit.html", audit=reads.audit())

    def api_page(request: Request) -> Response:
        return page(
            "api.html",
            filters=reads.filters,
            sorts=reads.sorts,
            limit=reads.sql_row_limit,
            byte_limit=reads.sql_answer_bytes,
            size=PAGE_SIZE,
        )

    def api_runs(request: Request) -> Response:
        filters, since, sort, number = runs_query(request)
        found = reads.runs(filters, since, sort, number, PAGE_SIZE)
        return JSONResponse(
            {
                "position": reads.position,
                "total": found.total,
                "page": found.page,
                "pages": found.pages,
                "page_size": found.size,
                "sort": found.sort,
                "runs": json_value(found.rows),
            }
        )

    def api_run(request: Request) -> Response:
        report, _svg, _ids = reads.run(request.path_params["run"])
        return JSONResponse(
            json_value(
                {
                    "position": reads.position,
                    "run": report.run,
                    "nodes": [vars(n) for n in report.nodes],
                    "arms": {"columns": list(report.arms.columns), "rows": report.arms.rows},
                    "forks": report.forks,
                    "stages": report.stages,
                    "cut_point": report.cut_point,
                    "audit": {
                        "verdict": report.audit["verdict"],
                        "findings": report.audit["findings"],
                    },
                }
            )
        )

    def api_branches(request: Request) -> Response:
        # benchflow's branch-view document, the route its docs suggest to viewers
        return JSONResponse(reads.branches(request.path_params["run"]))

    def api_compare(request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        if not a or not b:
            raise BadParameter(
                f"expected a= and b= (two RUN:NODE addresses), found a={a!r} b={b!r}"
            )
        return JSONResponse(json_value(reads.compare(a, b)))

    def api_audit(request: Request) -> Response:
        return JSONResponse(json_value(reads.audit()))

    def api_sql(request: Request) -> Response:
        query = request.query_params.get("q", "")
        fmt = request.query_params.get("format", "json")
        if fmt not in ("json", "csv"):
            raise BadParameter(f"expected format=json or format=csv, found {fmt!r}")
        answer = reads.sql(query)
        try:
            return sql_csv(answer) if fmt == "csv" else sql_json(answer)
        except BaseException:
            answer.close()  # closed by its rows' end otherwise, here or as they are sent
            raise

    def sql_json(answer: SQLRows) -> Response:
        head = (
            _json_bytes(
                {
                    "position": answer.position,
                    "columns": answer.columns,
                    "row_limit": reads.sql_row_limit,
                    "byte_limit": reads.sql_answer_bytes,
                }
            )[:-1]
            + b',"rows":['
        )
        rows = capped(answer, len(head) + TAIL_BYTES)

        def document() -> Iterator[bytes]:
            """Sent as it is read, in pieces of about SEND_BYTES (each is a hop to a worker thread
            and back): what it holds is the rows of one fetch, never the whole answer."""
            pending, held = [head], len(head)
            for _row, piece in rows.encoded(_json_rows(answer.columns)):
                pending.append(piece)
                held += len(piece)
                if held >= SEND_BYTES:
                    yield b"".join(pending)
                    pending, held = [], 0
            tail: dict[str, Any] = {"truncated": rows.cut is not None, "cut": rows.cut}
            if rows.error is not None:
                tail.update(_error_document(rows.error))
            yield b"".join([*pending, b"],", _json_bytes(tail)[1:]])

        return StreamingResponse(
            document(),
            media_type="application/json",
            headers={"content-disposition": 'inline; filename="lineage-sql.json"'},
        )

    def sql_csv(answer: SQLRows) -> Response:
        """Held until it is whole (at most the byte cap), so its headers can say whether it was
        cut, and a query that fails on the way is an error, not a short file."""
        header = _csv_line(answer.columns)
        rows = capped(answer, len(header))
        body = b"".join([header, *(piece for _row, piece in rows.encoded(_csv_line))])
        if rows.error is not None:
            raise rows.error
        return Response(
            body,
            media_type="text/csv; charset=utf-8",
            headers={
                "content-disposition": 'attachment; filename="lineage-sql.csv"',
                "x-lineage-truncated": "true" if rows.cut else "false",
                "x-lineage-cut": rows.cut or "",
            },
        )

    def tree_css(request: Request) -> Response:
        return Response(reads.tree_style, media_type="text/css; charset=utf-8")

    routes = [
        Route("/", lambda request: RedirectResponse("/runs", status_code=303)),
        Route("/runs", html_errors(runs_page)),
        Route("/runs/{run:path}", html_errors(run_page)),
        Route("/arms/{run:path}", html_errors(arms_page)),
        Route("/compare", html_errors(compare_page)),
        Route("/charts", html_errors(charts_page)),
        Route("/sql", html_errors(sql_page)),
        Route("/audit", html_errors(audit_page)),
        Route("/api", api_page),
        Route("/api/runs", api_errors(api_runs)),
        Route("/api/runs/{run:path}/branches", api_errors(api_branches)),
        Route("/api/runs/{run:path}", api_errors(api_run)),
        Route("/api/arms/{run:path}", api_errors(api_arms)),
        Route("/api/charts", api_errors(api_charts)),
        Route("/api/compare", api_errors(api_compare)),
        Route("/api/audit", api_errors(api_audit)),
        Route("/api/sql", api_errors(api_sql)),
        Route("/assets/tree.css", tree_css),
        *trajectory_routes(reads, page, html_errors),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[
            Middleware(Guard, token=token),
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts),
        ],
    )
