"""A local Spark Connect server started from the installed PySpark, for tests and trials.

The pyspark 4.3 wheel ships the Connect server (``pyspark/jars/spark-connect_*.jar``), so no
Spark download is needed: :func:`local_connect_server` runs ``spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer`` from the wheel as a child process,
bound to ``127.0.0.1`` on a free port and guarded by a random token, and stops it on exit::

    from interlace import local_session
    from interlace.testing.connect import local_connect_server

    with local_connect_server() as url:            # "sc://localhost:PORT/;token=..."
        spark = local_session(remote=url)          # a Spark Connect session
        ...
        spark.stop()

The server is a separate process (its own JVM), so a classic SparkSession of the same Python
process is not disturbed by it. The client side needs ``pip install 'interlace[connect]'``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CONNECT_SERVER_CLASS", "local_connect_server"]

#: The server's main class, inside the pyspark wheel's ``spark-connect`` jar.
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def local_connect_server(
    *,
    master: str = "local[2]",
    port: int | None = None,
    conf: Mapping[str, str] | None = None,
    log_path: str | Path | None = None,
    startup_timeout_s: float = 120.0,
) -> Iterator[str]:
    """Run a Spark Connect server from the installed PySpark; yield its ``sc://`` URL.

    The server binds ``127.0.0.1`` only, requires a fresh random token (part of the URL:
    ``sc://localhost:PORT/;token=...``; gRPC then uses local credentials, no TLS) and runs its
    Python workers with the running interpreter (``PYSPARK_PYTHON``), so they import the same
    interlace. On exit the server's process group is stopped (SIGTERM, then SIGKILL).

    Args:
        master: The server's Spark master.
        port: The gRPC port (default: a free one).
        conf: Extra ``--conf`` settings of the server (e.g. ``spark.driver.memory``).
        log_path: Where the server's stdout and stderr go (default: a temporary file, whose
            last lines are in the error when the server does not come up).
        startup_timeout_s: How long to wait for the port to accept connections.

    Raises:
        RuntimeError: The server exited or did not listen within ``startup_timeout_s``.
    """
    from pyspark.find_spark_home import _find_spark_home

    spark_home = _find_spark_home()
    port = port if port is not None else _free_port()
    token = secrets.token_hex(16)
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        **(conf or {}),
    }
    cmd = [os.path.join(spark_home, "bin", "spark-submit"), "--class", CONNECT_SERVER_CLASS,
           "--master", master, "--name", "interlace-connect"]
    for k, v in settings.items():
        cmd += ["--conf", f"{k}={v}"]
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE")}
    env.update(
        SPARK_HOME=spark_home,
        SPARK_CONNECT_MODE="0",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        # Read by the server (spark.connect.authenticate.token); kept off the command line.
        SPARK_CONNECT_AUTHENTICATE_TOKEN=token,
    )
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="interlace-connect-", suffix=".log")
        os.close(fd)
        log = Path(name)
    else:
        log = Path(log_path)
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not _listening(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                state = (f"exited with code {proc.returncode}" if proc.returncode is not None
                         else f"did not listen on 127.0.0.1:{port} within {startup_timeout_s} s")
                msg = f"the Spark Connect server {state}; the last lines of its output:\n{tail}"
                raise RuntimeError(msg)
            time.sleep(0.5)
        yield f"sc://localhost:{port}/;token={token}"
    finally:
        _stop(proc)
        if log_path is None:
            log.unlink(missing_ok=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server's process group (the JVM and its Python workers)."""
    for sig, wait_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
    # Python workers the JVM forked may outlive it by a moment; they share its group.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
