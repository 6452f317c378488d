"""cxxrun's worker API for Python (docs/hangs.md).

    import cxxrun
    for n, batch in enumerate(data, start=first_step):
        with cxxrun.section("step", timeout=600):   # a hang inside is caught after 600 s
            train(batch)
        cxxrun.heartbeat()                          # judged by --heartbeat-timeout
        cxxrun.step(n)                              # the training step this worker reached

The calls write the worker's heartbeat page, which the agent reads
(common/heartbeat_layout.h; its offsets are in _layout.py). Every worker
cxxrun starts has a page (its beats and sections are judged only with
--heartbeat-timeout or --section-timeout; its step goes into the attempt's
progress, docs/restarts.md). Outside cxxrun (plain python, a notebook,
torchrun) there is none and every call does nothing, quietly and cheaply.
enabled() says whether cxxrun watches this worker's beats and sections: True
only in a worker started with one of those flags.
Under cxxrun the agent puts its own copy of this package first on every
worker's PYTHONPATH, so a worker imports the copy that matches its agent's
page whether pip, the .deb or nothing installed one.

The main thread speaks for the worker. heartbeat() from another thread counts
only when the main thread moved since the last beat that counted (it is at
another line, or it used CPU time): a side thread that keeps beating while the
main thread is wedged does not hide the hang, and it still arms the judge
(its first beat counts). A section from another thread is ignored (said once
on stderr). step() records a number, not a sign of life (no hang judge reads
it), so any thread may report it.

A bad argument raises ValueError naming the value and the rule, inside
cxxrun or not, so a script tried without cxxrun meets it there first.
"""
from __future__ import annotations

import contextlib
import mmap
import operator
import os
import sys
import threading
import time

from . import _layout

__all__ = ["enabled", "heartbeat", "section", "step"]

# The page as 8-byte and 4-byte words (native order, one store per field).
_Q_OWNER_PID = _layout.PAGE_OWNER_PID_AT // 8
_Q_BEATS = _layout.PAGE_BEATS_AT // 8
_Q_LAST_BEAT_NS = _layout.PAGE_LAST_BEAT_NS_AT // 8
_Q_STEP = _layout.PAGE_STEP_AT // 8
_Q_STEP_NS = _layout.PAGE_STEP_NS_AT // 8
_Q_JUDGED = _layout.PAGE_JUDGED_AT // 8
_STEP_MAX = 2**64 - 1
_TIMEOUT_MAX_NS = 10**9 * 60 * 60 * 24 * 365 * 100  # as the C ABI: far beyond any run

_page = None  # None: not looked for yet; False: none; else the mapped page
_q = None  # memoryview of the page as uint64 words
_i = None  # and as uint32 words
_warned = False
_map_lock = threading.Lock()


def _map():
    global _page, _q, _i
    if _page is not None:
        return _page or None
    # One thread maps; another calling meanwhile waits for its answer instead
    # of reading the "looked for" mark as "no page".
    with _map_lock:
        if _page is not None:
            return _page or None
        found = False
        path = os.environ.get(_layout.ENV)
        if path:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    page = mmap.mmap(fd, _layout.PAGE_SIZE)
                finally:
                    os.close(fd)
                q, i = memoryview(page).cast("Q"), memoryview(page).cast("I")
                if (q[_layout.PAGE_MAGIC_AT // 8] == _layout.MAGIC
                        and i[_layout.PAGE_VERSION_AT // 4] == _layout.VERSION
                        and i[_layout.PAGE_SECTION_COUNT_AT // 4] == _layout.SECTIONS):
                    q[_Q_OWNER_PID] = os.getpid()
                    _q, _i, found = q, i, page
            except (OSError, ValueError, TypeError):
                pass
        _page = found
    return _page or None


def _main_thread(what):
    global _warned
    if threading.current_thread() is threading.main_thread():
        return True
    if not _warned:
        _warned = True
        print("cxxrun: %s() from a thread other than the main one is ignored: only the main thread's "
              "progress shows the worker is not hung" % what, file=sys.stderr)
    return False


_main_at = None  # where the main thread was at the last beat that counted
_main_cpu = None  # and its CPU time then, in ns
_CPU_MOVED_NS = 1000000  # less is a blocked thread's noise


def _main_moved():
    """Whether the main thread moved since the last beat that counted: a
    side thread's beat speaks for the worker only then. The first counts."""
    global _main_at, _main_cpu
    main = threading.main_thread()
    frame = sys._current_frames().get(main.ident)
    at = (id(frame.f_code), frame.f_lineno) if frame is not None else None
    cpu = None  # no per-thread clock, or a main thread that ended (its id is no thread's any more)
    if main.is_alive():
        try:
            cpu = time.clock_gettime_ns(time.pthread_getcpuclockid(main.ident))
        except (AttributeError, OSError, OverflowError):
            pass
    moved = (_main_cpu is None and _main_at is None) or at != _main_at or (
        cpu is not None and _main_cpu is not None and cpu - _main_cpu >= _CPU_MOVED_NS)
    if moved:
        _main_at, _main_cpu = at, cpu
    return moved


def _now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def enabled() -> bool:
    """Whether cxxrun watches this worker's beats and sections: True in a
    worker cxxrun started with --heartbeat-timeout or --section-timeout.
    False outside cxxrun and under torchrun. step() needs neither: every
    worker cxxrun starts reports its steps."""
    return _map() is not None and _q[_Q_JUDGED] != 0


def heartbeat() -> None:
    """The main thread made progress. From another thread: counts only when
    the main thread moved since the last beat that counted."""
    if _map() is None:
        return
    if threading.current_thread() is threading.main_thread():
        global _main_at, _main_cpu
        _main_at = _main_cpu = None  # the main thread speaks for itself
    elif not _main_moved():
        return
    _q[_Q_LAST_BEAT_NS] = _now()
    _q[_Q_BEATS] += 1


def step(n: int) -> None:
    """This worker reached training step `n`, an int from 0 to 2**64-1. Any
    order: a restart from a checkpoint goes back. Not a heartbeat."""
    value = None
    if not isinstance(n, bool):
        try:
            value = operator.index(n)
        except TypeError:
            pass
    if value is None or not 0 <= value <= _STEP_MAX:
        raise ValueError("cxxrun.step: %r is not a step: a step is an int from 0 to 2**64-1 (a bool is not one)"
                         % (n,))
    if _map() is None:
        return
    # The step before its time: a reader that sees the time sees this step.
    _q[_Q_STEP] = value
    _q[_Q_STEP_NS] = _now()


def _section_name(name):
    if not isinstance(name, str):
        raise ValueError("cxxrun.section: name %r is not a str" % (name,))
    if not name:
        raise ValueError("cxxrun.section: name '' is empty: a section needs a name")
    if "\0" in name:
        raise ValueError("cxxrun.section: name %r holds a NUL character, which would end it on the heartbeat page"
                         % (name,))
    try:
        raw = name.encode()
    except UnicodeEncodeError:
        raise ValueError("cxxrun.section: name %r cannot be written in UTF-8" % (name,)) from None
    if len(raw) > _layout.NAME_MAX - 1:
        raise ValueError("cxxrun.section: name %r is %d bytes in UTF-8; the heartbeat page holds at most %d"
                         % (name, len(raw), _layout.NAME_MAX - 1))
    return raw + bytes(_layout.NAME_MAX - len(raw))


def _timeout_ns(timeout):
    if timeout is None:
        return 0
    seconds = None
    if not isinstance(timeout, (bool, str, bytes)):
        try:
            seconds = float(timeout)
        except (TypeError, ValueError):
            pass
    if seconds is None or not seconds > 0:  # also NaN
        raise ValueError("cxxrun.section: timeout %r is not a positive number of seconds (leave it out, or None, "
                         "for a section without a deadline of its own)" % (timeout,))
    return int(min(seconds * 1e9, _TIMEOUT_MAX_NS))


def _write_slot(at, fields):
    # The page's sequence lock: odd while this process writes the slot.
    seq_at = (at + _layout.SECTION_SEQ_AT) // 8
    seq = _q[seq_at]
    if seq % 2:
        return False
    _q[seq_at] = seq + 1
    fields()
    _q[seq_at] = seq + 2
    return True


class _Section:
    """An open span of the main thread's work in one slot of the page."""

    __slots__ = ("_name", "_timeout_ns", "_open")

    def __init__(self, name, timeout_ns):
        self._name = name
        self._timeout_ns = timeout_ns
        self._open = []  # the slots this object holds, innermost last (it may be entered again)

    def __enter__(self) -> None:
        if _map() is None or not _main_thread("section"):
            self._open.append(None)
            return
        page, slot = _page, None
        for k in range(_layout.SECTIONS):
            at = _layout.PAGE_SECTIONS_AT + k * _layout.SECTION_SIZE
            if _i[(at + _layout.SECTION_ACTIVE_AT) // 4] != 0:
                continue

            def begin(at=at):
                _q[(at + _layout.SECTION_STARTED_NS_AT) // 8] = _now()
                _q[(at + _layout.SECTION_TIMEOUT_NS_AT) // 8] = self._timeout_ns
                _i[(at + _layout.SECTION_ACTIVE_AT) // 4] = 1
                page[at + _layout.SECTION_NAME_AT: at + _layout.SECTION_NAME_AT + _layout.NAME_MAX] = self._name

            if _write_slot(at, begin):
                slot = at
                break
        self._open.append(slot)  # None: every slot taken; the section goes unwatched

    def __exit__(self, *exc) -> None:
        slot = self._open.pop() if self._open else None
        if slot is not None:
            def end():
                _i[(slot + _layout.SECTION_ACTIVE_AT) // 4] = 0

            _write_slot(slot, end)


def section(name: str, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
    """`with cxxrun.section(name, timeout):` a named span of the main thread's
    work. The agent calls the worker hung when it stays open past `timeout`
    seconds (None: no deadline of its own) or past --section-timeout for the
    name, whichever is shorter. `name`: 1 to 31 bytes of UTF-8, no NUL.
    Sections nest."""
    return _Section(_section_name(name), _timeout_ns(timeout))
