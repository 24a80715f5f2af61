"""What the command line prints when a command fails: one short message, not a trace.

``interlace run`` and ``interlace demo`` send Spark's own output (the JVM's log lines, Python
worker tracebacks, PySpark's warnings) to a log file while they run, and on failure print
a few lines: the problem, the fix and where the full trace is::

    interlace: the checkpoint out/checkpoint was written by another spec; use a new ...
      StateVersionError: state blob was written by an operator with a different spec (...)
      run with --verbose for the full trace, or see .interlace/logs/p.log

With ``--verbose`` nothing is redirected: Spark's output and the Python traceback appear as
they happen, then the same message. Exit codes: 2 for a problem in the configuration or the
input (a pipeline error, a missing path, a bad schema, a checkpoint of another spec, a
malformed record under ``mode = "FAILFAST"``), 1 for anything else. docs/cli.md lists the
messages and their fixes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

__all__ = ["CONFIG_EXIT", "FAILURE_EXIT", "Explained", "explain_error", "run_command"]

#: Exit code of a problem in the configuration or the input data.
CONFIG_EXIT = 2
#: Exit code of any other failure.
FAILURE_EXIT = 1

_VERBOSE_HINT = "run with --verbose for the full trace"
_SPARK_COMMANDS = ("run", "demo", "inspect")
_MAX_LINE = 400
# An interlace exception raised in a Python worker, as the last line of its traceback.
_WORKER_ERROR = re.compile(r"^interlace(?:\.\w+)*\.(\w+Error): (.+)$", re.MULTILINE)
_PATH_NOT_FOUND = re.compile(r"\[PATH_NOT_FOUND\] Path does not exist: (\S+?)\.?(?: SQLSTATE|$)")
_FAILED_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)")
_MALFORMED = re.compile(r"Malformed records are detected in record parsing: (.*?)\.?\s*$", re.M)
# Exception lines of a trace (Java "Caused by:" or a Python traceback's last line).
_EXCEPTION_LINE = re.compile(r"^(?:Caused by: )?([A-Za-z_][\w.$]*(?:Error|Exception)): (.+)$", re.M)
# Wrappers around the real cause, never worth showing.
_WRAPPERS = re.compile(
    r"^(py4j\.|.*StreamingQueryException$|.*ForeachBatchUserFuncException$|"
    r"org\.apache\.spark\.SparkException$)"
)


@dataclass(frozen=True)
class Explained:
    """An error as the command line reports it.

    Attributes:
        problem: The first line: what went wrong (after ``interlace: ``).
        details: Further lines: interlace's own message, the fix.
        code: The exit code (:data:`CONFIG_EXIT` or :data:`FAILURE_EXIT`).
        trace: Whether a trace is worth pointing at (``--verbose``, the log file).

    """

    problem: str
    details: tuple[str, ...] = ()
    code: int = FAILURE_EXIT
    trace: bool = True

    def render(self, log: str | None = None, *, verbose: bool = False) -> str:
        """Return the message: the problem, the details, then where the full trace is."""
        lines = [f"interlace: {self.problem}", *(f"  {d}" for d in self.details)]
        if self.trace and not verbose:
            lines.append(f"  {_VERBOSE_HINT}" + (f", or see {log}" if log else ""))
        return "\n".join(lines)


@dataclass(frozen=True)
class _Context:
    """What the failing command was running: names sources and the checkpoint in messages."""

    pipeline: Any = None
    base: Path = Path()
    file: str | None = None

    def source_of(self, path: str) -> Any:
        """Return the file source whose folder is ``path`` or holds it (else None)."""
        if self.pipeline is None:
            return None
        target = os.path.abspath(path)
        for src in self.pipeline.sources:
            if src.path and ":" not in src.path:
                folder = os.path.abspath(os.path.join(self.base, src.path))
                if target == folder or target.startswith(folder.rstrip(os.sep) + os.sep):
                    return src
        return None

    def in_file(self) -> str:
        return f" in {self.file}" if self.file else ""


def run_command(args: argparse.Namespace, dispatch: Callable[[argparse.Namespace], int]) -> int:
    """Run ``dispatch(args)``; on failure print a short message and return its exit code.

    ``run``, ``demo`` and ``inspect`` write Spark's output to a log file (named in the message)
    unless ``args.verbose``; with ``args.verbose`` the full trace is printed before the message.
    """
    verbose = bool(vars(args).pop("verbose", False))  # consumed here: commands never see it
    capture = args.command in _SPARK_COMMANDS and not verbose
    if capture:
        import interlace.runner  # noqa: F401 - its default progress stream: the real stderr

    with contextlib.ExitStack() as stack:
        log, fh = _open_log(_log_path(args)) if capture else (None, None)
        if fh is not None:
            stack.enter_context(_stderr_to(fh))
        try:
            return dispatch(args)
        except Exception as exc:
            output = None
            if fh is not None and log is not None:
                fh.flush()
                with open(log, encoding="utf-8", errors="replace") as start:
                    output = start.read(1 << 16)  # the JVM says why it did not start up here
                fh.write("\n" + "".join(traceback.format_exception(exc)))
            elif verbose:
                traceback.print_exc()
            explained = explain_error(exc, context=_context(args), output=output)
    print(explained.render(_shown(log) if log else None, verbose=verbose), file=sys.stderr)
    return explained.code


def explain_error(
    exc: BaseException, *, context: Any = None, output: str | None = None
) -> Explained:
    """Map an exception to the short message the command line prints.

    Args:
        exc: What the command raised: an interlace error, a PySpark exception (its message
            holds the causes, and the traceback of a Python worker's error), anything else.
        context: The ``_Context`` of the run (pipeline, base folder), to name sources.
        output: What Spark printed so far (the log file), for errors whose cause is only
            there: the JVM failing to start says why on its own output.

    Returns:
        The :class:`Explained` message.

    """
    from interlace.operators.errors import ConfigError
    from interlace.state.errors import InterlaceError

    ctx = context if isinstance(context, _Context) else _Context()
    if isinstance(exc, ConfigError):
        return Explained(f"configuration error: {exc}", code=CONFIG_EXIT, trace=False)
    if isinstance(exc, InterlaceError):
        return _interlace_error(type(exc).__name__, str(exc), ctx)
    text = str(exc).strip()
    if not _is_spark_error(exc):
        if isinstance(exc, FileNotFoundError | ValueError):
            return Explained(text, code=CONFIG_EXIT, trace=False)
        return Explained(_clip(f"{type(exc).__name__}: {_first_line(text)}"))
    worker = _WORKER_ERROR.search(text)
    if worker:
        return _interlace_error(worker.group(1), worker.group(2).strip(), ctx)
    missing = _PATH_NOT_FOUND.search(text)
    if missing:
        return _path_not_found(missing.group(1), ctx)
    if "MALFORMED_RECORD_IN_PARSING" in text or "Parse Mode: FAILFAST" in text:
        return _malformed(text, ctx)
    if _is_parse_error(exc, text):
        explained = _parse_error(text, ctx)
        if explained is not None:
            return explained
    if "JAVA_GATEWAY_EXITED" in text and output:
        started = _jvm_start_failure(output)
        if started:
            return Explained(_clip(f"Spark did not start: {started}"))
    return _generic(text)


def _jvm_start_failure(output: str) -> str | None:
    """The reason the JVM gave for exiting at start-up (e.g. a bad master URL), if any."""
    m = re.search(r'^Exception in thread "main" ([\w.$]+): (.+)$', output, re.MULTILINE)
    if m:
        return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2).strip()}"
    noise = re.compile(r"^(\S+ \S+ (WARN|INFO) |WARNING: |Using Spark's|Setting default|To adjust)")
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not noise.match(ln)]
    return lines[-1] if lines else None


# --------------------------------------------------------------------------------------------
# The messages
# --------------------------------------------------------------------------------------------


def _interlace_error(name: str, message: str, ctx: _Context) -> Explained:
    if name == "ConfigError":
        return Explained(f"configuration error: {message}", code=CONFIG_EXIT)
    if name in ("StateVersionError", "StateDecodeError"):
        ckpt = _checkpoint(ctx)
        where = f"the checkpoint {ckpt}" if ckpt else "the checkpoint"
        if "different spec" in message:
            problem = f"{where} was written by another spec; use a new checkpoint or restore "
            problem += "the old spec"
        elif name == "StateDecodeError":
            problem = (f"{where} holds state this interlace cannot decode (corrupted, "
                       "truncated, or of another operator); restore it from a backup or use a "
                       "new checkpoint")
        else:
            problem = f"{where} cannot be read by this interlace"
        return Explained(problem, (f"{name}: {message}",), code=CONFIG_EXIT)
    return Explained(f"{name}: {message}")


def _path_not_found(path: str, ctx: _Context) -> Explained:
    path = re.sub(r"^file:(//)?", "", path)
    src = ctx.source_of(path)
    if src is None:
        return Explained(
            f"a source path does not exist: {path}",
            ("fix: correct the `path` of the [[sources]] table that reads it, or create it",),
            code=CONFIG_EXIT,
        )
    return Explained(
        f"source {src.name!r} reads {src.path!r}, which does not exist ({path})",
        (
            f"fix: correct `path` in the [[sources]] table named {src.name!r}{ctx.in_file()}, "
            "or create the folder",
        ),
        code=CONFIG_EXIT,
    )


def _malformed(text: str, ctx: _Context) -> Explained:
    file_m = _FAILED_FILE.search(text)
    path = re.sub(r"^file:(//)?", "", file_m.group(1)) if file_m else None
    record_m = _MALFORMED.search(text)
    cause = ""
    if record_m:
        after = text[record_m.end() :]
        cause_m = _EXCEPTION_LINE.search(after)
        if cause_m:
            cause = _sentence(cause_m.group(2))
    src = ctx.source_of(path) if path else None
    what = "malformed record"
    if record_m and record_m.group(1).strip("[]").replace("null", "").strip(","):
        what += f" {record_m.group(1)}"  # Spark's partial parse, when it holds any value
    where = f" in {path}" if path else ""
    who = f"source {src.name!r}, " if src is not None else ""
    problem = f"{what}{where} ({who}mode FAILFAST)" + (f": {cause}" if cause else "")
    fix = (
        'fix: correct or remove the record, or drop mode = "FAILFAST" from the source\'s '
        "`options`: in PERMISSIVE mode (Spark's default) its bad fields become NULL and the "
        "progress line counts it as malformed"
    )
    return Explained(_clip(problem), (fix,), code=CONFIG_EXIT)


def _parse_error(text: str, ctx: _Context) -> Explained | None:
    from interlace.preflight import _TYPE_HELP

    sql_m = re.search(r"== SQL ==\s*\n(.*)", text)
    sql = sql_m.group(1).strip() if sql_m else ""
    what = _clean(_first_line(text))
    if ctx.pipeline is not None and sql:
        for src in ctx.pipeline.sources:
            if src.schema and sql.startswith(src.schema.strip()):
                return Explained(
                    f"the `schema` of source {src.name!r} is not valid Spark DDL: {what}",
                    (
                        f"schema = {src.schema!r}{ctx.in_file()}",
                        f"fix: {_TYPE_HELP}; `interlace validate` names the column",
                    ),
                    code=CONFIG_EXIT,
                )
            if src.sql and sql.startswith(src.sql.strip().splitlines()[0].strip()):
                return Explained(
                    f"the `sql` of source {src.name!r} does not parse: {what}",
                    ("fix: correct the Spark SQL in its [[sources]] table",),
                    code=CONFIG_EXIT,
                )
    if "UNSUPPORTED_DATATYPE" in text or "DATATYPE" in text.split("]")[0]:
        return Explained(
            f"a schema is not valid Spark DDL: {what}" + (f" in {sql!r}" if sql else ""),
            (f"fix: {_TYPE_HELP}",),
            code=CONFIG_EXIT,
        )
    return None


def _generic(text: str) -> Explained:
    head = _clean(_first_line(text))
    causes = [
        (cls, msg)
        for cls, msg in _EXCEPTION_LINE.findall(text)
        if not _WRAPPERS.match(cls) and not msg.startswith("Exception thrown in awaitResult")
    ]
    details: tuple[str, ...] = ()
    if causes:
        cls, msg = causes[-1]
        cause = f"{cls.rsplit('.', 1)[-1]}: {_clean(msg)}"
        if _clean(msg) not in head:
            details = (_clip(f"cause: {cause}"),)
    return Explained(_clip(head or "Spark failed"), details)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _is_spark_error(exc: BaseException) -> bool:
    try:
        from pyspark.errors import PySparkException
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    if isinstance(exc, PySparkException):
        return True
    return type(exc).__module__.startswith("py4j")


def _is_parse_error(exc: BaseException, text: str) -> bool:
    from pyspark.errors import ParseException

    return isinstance(exc, ParseException) or "== SQL ==" in text


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _clean(line: str) -> str:
    """Drop Spark's wrappers from a message line: query ids, condition tags, SQLSTATE, traces."""
    line = re.sub(r"^\[STREAM_FAILED\] Query \[[^\]]*\] terminated with exception: ", "", line)
    line = re.split(r"\s*(?:Traceback \(most recent call last\)|Return Message:)", line)[0]
    line = re.sub(r"\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\]\s*", "", line)
    line = re.sub(r"\s*SQLSTATE: \w+", "", line)
    line = re.sub(r"\s*\(line \d+, pos \d+\)", "", line)
    return line.strip()


def _sentence(message: str) -> str:
    """The first sentence of a Java exception message, without a parser's source dump."""
    message = _clean(message)
    message = re.sub(r"\s*\([^()]*\[Source:.*$", "", message)
    return re.split(r"(?<=\.) ", message, maxsplit=1)[0]


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE else line[: _MAX_LINE - 3] + "..."


def _checkpoint(ctx: _Context) -> str | None:
    if ctx.pipeline is None:
        return None
    return _shown(ctx.pipeline.checkpoint_folder(ctx.base))


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies inside it, else absolute."""
    path = Path(os.path.abspath(path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _context(args: argparse.Namespace) -> _Context:
    if args.command != "run":
        return _Context(base=Path.cwd())
    from interlace.pipeline import Pipeline

    try:
        pipeline = Pipeline.load(args.pipeline)
    except Exception:
        pipeline = None
    return _Context(pipeline, Path.cwd(), str(args.pipeline))


def _log_path(args: argparse.Namespace) -> Path:
    """Where a run's Spark output goes: ``.interlace/logs/`` of the run's folder."""
    if args.command in ("run", "inspect"):
        suffix = "" if args.command == "run" else "-inspect"
        return Path.cwd() / ".interlace" / "logs" / f"{Path(args.pipeline).stem}{suffix}.log"
    workdir = getattr(args, "workdir", None)
    if workdir is not None:
        return Path(workdir).resolve() / ".interlace" / "logs" / "demo.log"
    return Path(tempfile.gettempdir()) / f"interlace-demo-{os.getpid()}.log"


def _open_log(path: Path) -> tuple[Path, TextIO]:
    """Open ``path`` for writing (a temp file when that fails, e.g. a read-only folder)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path, open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by _stderr_to
    except OSError:
        fd, name = tempfile.mkstemp(prefix="interlace-", suffix=".log")
        return Path(name), open(fd, "w", encoding="utf-8")  # noqa: SIM115


@contextlib.contextmanager
def _stderr_to(log: TextIO) -> Iterator[None]:
    """Send file descriptor 2 and Python's warnings to ``log`` while the command runs.

    The JVM and its Python workers inherit descriptor 2 when Spark starts. ``sys.stderr``
    becomes a stream on the terminal's descriptor, for progress lines and the final message.
    """
    sys.stderr.flush()
    terminal_fd = os.dup(2)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    terminal = open(terminal_fd, "w", encoding=encoding, errors="backslashreplace", buffering=1)  # noqa: SIM115
    os.dup2(log.fileno(), 2)
    saved = sys.stderr, warnings.showwarning

    def to_log(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        log.write(warnings.formatwarning(message, category, filename, lineno, line))
        log.flush()

    sys.stderr, warnings.showwarning = terminal, to_log
    try:
        yield
    finally:
        terminal.flush()
        log.flush()
        os.dup2(terminal_fd, 2)
        sys.stderr, warnings.showwarning = saved
        terminal.close()
        log.close()
