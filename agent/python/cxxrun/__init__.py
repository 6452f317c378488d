"""cxxrun's worker API for Python, on every worker's PYTHONPATH (docs/hangs.md).

    import cxxrun
    for batch in data:
        with cxxrun.section("step", timeout=600):   # a hang inside is caught after 600 s
            train(batch)
        cxxrun.heartbeat()                          # judged by --heartbeat-timeout

The main thread speaks for the worker. heartbeat() from another thread counts
only when the main thread moved since the last beat that counted (it is at
another line, or it used CPU time): a side thread that keeps beating while the
main thread is wedged does not hide the hang, and it still arms the judge
(its first beat counts). A section from another thread is ignored (said once
on stderr). Without --heartbeat-timeout or --section-timeout the agent gives
the worker no page, and every call does nothing.
"""
import contextlib
import mmap
import os
import struct
import sys
import threading
import time

__all__ = ["heartbeat", "section", "enabled"]

_MAGIC = 0x42484E5552585843  # "CXXRUNHB"
_PAGE_SIZE = 4096
_SECTIONS_AT, _SECTION_SIZE, _SECTIONS, _NAME_MAX = 64, 64, 16, 32
_page = None  # None: not looked for yet; False: none
_warned = False


_map_lock = threading.Lock()


def _map():
    global _page
    if _page is not None:
        return _page or None
    # One thread maps; another calling meanwhile waits for its answer instead
    # of reading the "looked for" mark as "no page".
    with _map_lock:
        if _page is not None:
            return _page or None
        page_found = False
        path = os.environ.get("CXXRUN_HEARTBEAT_FILE")
        if path:
            try:
                fd = os.open(path, os.O_RDWR)
                try:
                    page = mmap.mmap(fd, _PAGE_SIZE)
                finally:
                    os.close(fd)
                if struct.unpack_from("<Q", page, 0)[0] == _MAGIC:
                    struct.pack_into("<Q", page, 16, os.getpid())
                    page_found = page
            except (OSError, ValueError):
                pass
        _page = page_found
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


def enabled():
    """Whether the agent judges this worker's heartbeats or sections."""
    return _map() is not None


def heartbeat():
    """The main thread made progress. From another thread: counts only when
    the main thread moved since the last beat that counted."""
    page = _map()
    if page is None:
        return
    if threading.current_thread() is threading.main_thread():
        global _main_at, _main_cpu
        _main_at = _main_cpu = None  # the main thread speaks for itself
    elif not _main_moved():
        return
    beats = struct.unpack_from("<Q", page, 24)[0]
    struct.pack_into("<Q", page, 32, _now())
    struct.pack_into("<Q", page, 24, beats + 1)


def _write_slot(page, at, fields):
    # The page's sequence lock: odd while this process writes the slot.
    seq = struct.unpack_from("<Q", page, at)[0]
    if seq % 2:
        return False
    struct.pack_into("<Q", page, at, seq + 1)
    fields()
    struct.pack_into("<Q", page, at, seq + 2)
    return True


@contextlib.contextmanager
def section(name, timeout=0):
    """A named span of the main thread's work; with `timeout` (seconds) the
    agent calls the worker hung when it stays open longer (--section-timeout
    may set a shorter limit for the name)."""
    page = _map()
    if page is None or not _main_thread("section"):
        yield
        return
    raw = name.encode()[: _NAME_MAX - 1]
    slot = None
    for i in range(_SECTIONS):
        at = _SECTIONS_AT + i * _SECTION_SIZE
        if struct.unpack_from("<I", page, at + 24)[0] == 0:
            def begin(at=at):
                struct.pack_into("<QQII", page, at + 8, _now(), int(timeout * 1e9), 1, 0)
                page[at + 32: at + 64] = raw + bytes(_NAME_MAX - len(raw))
            if _write_slot(page, at, begin):
                slot = at
                break
    try:
        yield
    finally:
        if slot is not None:
            _write_slot(page, slot, lambda: struct.pack_into("<I", page, slot + 24, 0))
