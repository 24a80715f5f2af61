"""CPU accounting from /proc: the benchmark's own processes (per kind) and everything else.

A run's CPU seconds are split into ``driver`` (this Python process: py4j, ``foreachBatch``),
``jvm`` (Spark's JVM, local mode) and ``python_workers`` (PySpark's daemon and the workers the
JVM forks, where interlace's step runs), plus ``outside``: the machine's busy time not spent
by those (other users of the machine). Outside load disturbs CPU seconds far less than wall
time, so input rows per CPU-second of our own processes is the steadier figure on a shared
machine. Linux only; elsewhere the snapshots are empty and every figure is 0.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

KINDS = ("driver", "jvm", "python_workers")


def _proc_stats() -> dict[int, tuple[int, str, int]]:
    """``pid -> (parent pid, command name, utime+stime+reaped children's ticks)``."""
    out: dict[int, tuple[int, str, int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        out[int(d.name)] = (int(fields[1]), comm, sum(int(x) for x in fields[11:15]))
    return out


def tree_ticks(root: int) -> dict[str, int]:
    """CPU ticks of ``root``'s process tree, per kind (see the module docstring)."""
    stats = _proc_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    out = dict.fromkeys(KINDS, 0)
    todo = [(root, "driver")]
    while todo:
        pid, parent_kind = todo.pop()
        _, comm, ticks = stats.get(pid, (0, "", 0))
        if pid == root:
            kind = "driver"
        elif comm == "java":
            kind = "jvm"
        elif parent_kind in ("jvm", "python_workers"):
            kind = "python_workers"
        else:
            kind = parent_kind
        out[kind] += ticks
        todo.extend((c, kind) for c in children.get(pid, []))
    return out


@dataclasses.dataclass(frozen=True)
class CpuSnap:
    """The machine's busy ticks and this process tree's ticks per kind, at one moment."""

    machine_busy: int
    tree: dict[str, int]


def snapshot() -> CpuSnap:
    """Take a :class:`CpuSnap` (empty where /proc is missing)."""
    try:
        vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        busy = sum(vals) - vals[3] - (vals[4] if len(vals) > 4 else 0)  # minus idle, iowait
        return CpuSnap(busy, tree_ticks(os.getpid()))
    except (OSError, ValueError):
        return CpuSnap(0, {})


def delta(before: CpuSnap, after: CpuSnap) -> dict[str, float]:
    """CPU seconds between two snapshots: per kind of ours, and ``outside`` (everyone else)."""
    hz = os.sysconf("SC_CLK_TCK")
    ours = {k: max(after.tree.get(k, 0) - before.tree.get(k, 0), 0) / hz for k in after.tree}
    machine = (after.machine_busy - before.machine_busy) / hz
    ours["outside"] = max(machine - sum(ours.values()), 0.0)
    return ours


def own_seconds(cpu: dict[str, float]) -> float:
    """CPU seconds of the benchmark's own processes in ``cpu`` (a :func:`delta`)."""
    return sum(v for k, v in cpu.items() if k != "outside")


def jvm_pid() -> int | None:
    """PID of the Spark JVM this process launched (local mode), if any."""
    me = os.getpid()
    for pid, (ppid, comm, _) in _proc_stats().items():
        if ppid == me and comm == "java":
            return pid
    return None


def jcmd(pid: int, *command: str) -> None:
    """Run ``jcmd PID COMMAND...`` (Java Flight Recordings, ``--jfr``)."""
    subprocess.run(["jcmd", str(pid), *command], check=True, capture_output=True)
