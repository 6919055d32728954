"""The submission server's HTTP face (FastAPI, served by uvicorn): the API, the student's page, the staff's page.

    GET  /api/health                       200 without a token
    GET  /api/tasks                        the homework's tasks and points
    POST /api/submit?task=T&filename=F     the file as the request body; Authorization: Bearer TOKEN
    GET  /api/submissions/{id}             one of the caller's submissions: state, place in the queue, verdict
    GET  /api/results                      the caller's attempts and verdicts (the student view)
    GET  /api/leaderboard                  the live speed leaderboard (pseudonyms unless the course opts in)
    GET  /api/staff/queue                  staff: the queue and recent verdicts
    GET  /api/staff/gradebook.csv          staff: the gradebook, from the ledger
    GET  /api/staff/canvas.csv             staff: the gradebook's totals for Canvas's import (grader/course/canvas.py)
    POST /api/staff/pause, /api/staff/resume   staff: stop or go on taking submissions off the queue
    POST /api/staff/regrade[?task=T]       staff: grade each student's latest file again, below every student's
    GET  /                                 the student's page; GET /staff: the staff's

A student sees only their own submissions: another's id answers 404, as one that does not exist.
"""

import asyncio
from pathlib import Path

from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response

from grader.course.batch import CANVAS
from grader.gates.intake import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES
from grader.gates.notebook import is_notebook
from grader.results import report
from grader.server import pages
from grader.server.service import Refused, Server

BODY_S = 120.0
"""Seconds an upload's body may take to arrive (32 MiB at 280 KB/s); past it, 408."""
INFLIGHT_BYTES = 256 << 20
"""Bytes of uploads the server holds in memory at once, all clients together (each upload counts its declared
length, or its limit when it declares none); past it, 503 with Retry-After."""


class PolicyHeaders:
    """ASGI middleware: every answer says that only the server's own scripts, style and pictures may run or show
    (grader/server/pages.py `CSP`). Plain ASGI, so an upload's body still streams to its handler."""

    HEADERS = [(b"content-security-policy", pages.CSP.encode()), (b"x-content-type-options", b"nosniff"),
               (b"referrer-policy", b"no-referrer")]

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(server: Server) -> FastAPI:
    """The app over `server` (its queue, its grading thread and its views)."""
    app = FastAPI(title="Triton homework submissions", docs_url=None, redoc_url=None)

    def who(authorization: str | None, staff: bool = False) -> tuple[str, str]:
        token = authorization[7:].strip() if authorization and authorization.lower().startswith("bearer ") else None
        holder = server.sc.tokens.who(token)
        if holder is None:
            raise HTTPException(401, "no valid token: send Authorization: Bearer <your token>",
                                headers={"WWW-Authenticate": "Bearer"})
        if staff and holder[1] != "staff":
            raise HTTPException(403, "a staff token is needed")
        return holder

    app.add_middleware(PolicyHeaders)

    @app.exception_handler(Refused)
    async def refused(_request, exc: Refused):
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    _student_routes(app, server, who)
    _staff_routes(app, server, who)
    _page_routes(app, server)
    return app


def _student_routes(app: FastAPI, server: Server, who) -> None:
    """What a student's token (or none) reaches: the homework, submitting, one's own submissions and pictures,
    the leaderboard."""

    @app.get("/api/health")
    def health() -> dict:
        return {"ok": True, "homework": server.hw.id, "device": server.sc.device}

    @app.get("/api/tasks")
    def tasks() -> dict:
        return {"homework": server.hw.id, "title": server.hw.title, "max_attempts": server.hw.max_attempts or None,
                "deadline": server.hw.deadline.isoformat() if server.hw.deadline else None,
                "tasks": [{"id": t, "points": p} for t, p in server.hw.tasks.items()]}

    inflight = [0]  # bytes of uploads being received now, all connections together

    @app.post("/api/submit", status_code=201)
    async def submit(request: Request, task: str, filename: str = "", authorization: str | None = Header(None)):
        student, _role = who(authorization)
        # The file's own limit, known from its name before a byte of it is read: a .py's 1 MiB, a notebook's
        # 32 MiB (a .py was read up to 32 MiB before the server refused it at 1 MiB).
        limit = MAX_NOTEBOOK_BYTES if is_notebook(Path(filename or "x.py")) else MAX_SOURCE_BYTES
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            raise HTTPException(413, f"the file is {int(declared)} bytes, over the grader's limit of {limit} bytes")
        want = int(declared) if declared and declared.isdigit() else limit
        if inflight[0] + want > INFLIGHT_BYTES:
            raise HTTPException(503, "the server is receiving many files at once: send yours again in a minute",
                                headers={"Retry-After": "30"})
        inflight[0] += want
        try:
            chunks, size = [], 0
            async with asyncio.timeout(BODY_S):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise HTTPException(413, f"the file is over the grader's limit of {limit} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise HTTPException(408, f"the file did not arrive within {BODY_S:g} s") from None
        finally:
            inflight[0] -= want
        return server.submit(student, task, filename or f"{task}.py", b"".join(chunks))

    @app.get("/api/submissions/{sid}")
    def submission(sid: int, authorization: str | None = Header(None)) -> dict:
        student, _role = who(authorization)
        row = server.queue.get(sid)
        if row is None or row["student"] != student:
            raise HTTPException(404, "no such submission of yours")
        return server.view(row)

    @app.get("/api/results")
    def results(authorization: str | None = Header(None)) -> dict:
        student, _role = who(authorization)
        return server.results(student)

    @app.get("/api/pictures/{sid}/{test}")
    def picture(sid: int, test: str, authorization: str | None = Header(None)):
        student, _role = who(authorization)
        row = server.queue.get(sid)
        if row is None or row["student"] != student:
            raise HTTPException(404, "no such submission of yours")
        shown = server.view(row)
        for t in (shown.get("result") or {}).get("tests", []):
            path = report.picture_file(server.out / student, t.get("picture") or "") if t.get("name") == test \
                else None
            if path is not None:
                return Response(path.read_bytes(), media_type="image/png")
        raise HTTPException(404, "no picture for that test")

    @app.get("/api/leaderboard")
    def board() -> dict:
        return server.board()


def _staff_routes(app: FastAPI, server: Server, who) -> None:
    """What a staff token reaches: the queue, a student's history, the course's CSVs, pause, resume, regrade."""

    @app.get("/api/staff/queue")
    def staff_queue(authorization: str | None = Header(None)) -> dict:
        who(authorization, staff=True)
        return server.staff_queue()

    @app.get("/api/staff/students/{name}")
    def history(name: str, authorization: str | None = Header(None)) -> dict:
        who(authorization, staff=True)
        return server.history(name)

    @app.get("/api/staff/gradebook.csv")
    def gradebook(authorization: str | None = Header(None)):
        who(authorization, staff=True)
        server.fresh_views()  # written off the grading path; made now if a verdict came since
        return PlainTextResponse((server.out / "gradebook.csv").read_text(), media_type="text/csv")

    @app.get("/api/staff/canvas.csv")
    def canvas_csv(authorization: str | None = Header(None)):
        who(authorization, staff=True)
        path = server.out / CANVAS
        server.fresh_views()
        return Response(path.read_bytes(), media_type="text/csv")  # as written: CRLF line ends, as Canvas's own

    @app.post("/api/staff/pause")
    def pause(authorization: str | None = Header(None)) -> dict:
        who(authorization, staff=True)
        server.paused = True
        return {"paused": True}

    @app.post("/api/staff/resume")
    def resume(authorization: str | None = Header(None)) -> dict:
        who(authorization, staff=True)
        server.paused = False
        return {"paused": False}

    @app.post("/api/staff/regrade")
    def regrade(task: str | None = None, authorization: str | None = Header(None)) -> dict:
        who(authorization, staff=True)
        if task is not None and task not in server.hw.tasks:
            raise HTTPException(404, f"{server.hw.id} has no task {task!r}")
        return server.regrade(task)


def _page_routes(app: FastAPI, server: Server) -> None:
    """The two pages (grader/server/pages.py) and the files they load."""
    student_page, staff_page = pages.render("student", server.hw.title), pages.render("staff", server.hw.title)
    static = pages.static_files()

    @app.get("/", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(student_page)

    @app.get("/staff", response_class=HTMLResponse)
    def staff() -> HTMLResponse:
        return HTMLResponse(staff_page)

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        if name not in static:
            raise HTTPException(404, "no such file")
        data, media = static[name]
        return Response(data, media_type=media)


def serve(server: Server, host: str, port: int, listening=lambda: None) -> None:
    """Run the service on host:port until stopped; `listening()` once the socket is bound (not before: a busy
    port ends here with uvicorn's one line, and nothing said "serving")."""
    import uvicorn

    from grader.server.http import GuardedH11Protocol

    class Listening(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            if self.started:
                listening()

    server.start()
    try:
        # no limit_concurrency: uvicorn counts idle connections against it, so slow clients made every request
        # answer 503; grader/server/http.py bounds them by address and by a deadline for their headers
        Listening(uvicorn.Config(create_app(server), host=host, port=port, log_level="warning",
                                 timeout_keep_alive=5, http=GuardedH11Protocol)).run()
    finally:
        server.stop()
