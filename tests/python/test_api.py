"""The cxxrun package's API (agent/python/cxxrun/__init__.py): a quiet no-op
outside cxxrun, the page as common/heartbeat_layout.h lays it out inside,
the main-thread rule, nesting, and ValueError for bad arguments."""
import inspect
import os
import sys
import threading
import time
import typing

import pytest

from conftest import LAYOUT, FakePage, fresh_cxxrun

NAME_MAX = LAYOUT.macros["NAME_MAX"]


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def in_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(timeout=60)
    assert not t.is_alive()
    if errors:
        raise errors[0]


def test_the_public_api():
    cxxrun = fresh_cxxrun()
    assert sorted(cxxrun.__all__) == ["enabled", "heartbeat", "section", "step"]
    for name in cxxrun.__all__:
        hints = getattr(cxxrun, name).__annotations__
        assert "return" in hints, f"{name}() has no return type"
        assert set(hints) - {"return"} == set(inspect.signature(getattr(cxxrun, name)).parameters), name
        if sys.version_info >= (3, 10):  # `float | None` evaluates from 3.10 on
            typing.get_type_hints(getattr(cxxrun, name))  # every hint names something real
    assert os.path.isfile(os.path.join(os.path.dirname(cxxrun.__file__), "py.typed"))


# ---- outside cxxrun ---------------------------------------------------------

def test_outside_cxxrun_every_call_is_a_quiet_no_op(outside, capfd):
    assert outside.enabled() is False
    outside.heartbeat()
    outside.step(3)
    with outside.section("step", timeout=5):
        with outside.section("inner"):
            pass
    in_thread(lambda: (outside.heartbeat(), outside.step(4), outside.section("side").__enter__()))
    assert outside.enabled() is False
    assert capfd.readouterr() == ("", "")


@pytest.mark.parametrize("what", ["missing", "empty", "no magic", "another version", "another section count",
                                  "too short"])
def test_a_page_that_is_not_one_leaves_it_off(what, tmp_path, monkeypatch, capfd):
    path = str(tmp_path / "page")
    if what == "empty":
        path = ""
    elif what != "missing":
        args = {"no magic": {"magic": 0}, "another version": {"version": LAYOUT.macros["VERSION"] + 1},
                "another section count": {"section_count": 3}}.get(what, {})
        FakePage(path, **args)
        if what == "too short":
            with open(path, "r+b") as f:
                f.truncate(100)
    monkeypatch.setenv(LAYOUT.macros["ENV"], path)
    cxxrun = fresh_cxxrun()
    assert cxxrun.enabled() is False
    cxxrun.heartbeat()
    cxxrun.step(1)
    with cxxrun.section("step", 1):
        pass
    assert capfd.readouterr() == ("", "")
    if path:
        written = FakePage.__new__(FakePage)
        written.path = path
        if what != "missing":
            assert written.read("owner_pid") == written.read("beats") == written.read("step_ns") == 0


# ---- inside: what each call writes ------------------------------------------

def test_enabled_attaches_and_says_whose_page_it_is(cxxrun, page):
    assert page.read("owner_pid") == 0
    assert cxxrun.enabled() is True
    assert page.read("owner_pid") == os.getpid()


def test_enabled_is_false_on_a_page_whose_beats_are_not_judged(tmp_path, monkeypatch):
    # Every worker cxxrun starts has a page (its steps are its progress);
    # without --heartbeat-timeout or --section-timeout nothing judges its
    # beats, and enabled() says so. step() still writes.
    p = FakePage(str(tmp_path / "rank0.1"), judged=0)
    monkeypatch.setenv(LAYOUT.macros["ENV"], p.path)
    unwatched = fresh_cxxrun()
    assert unwatched.enabled() is False
    unwatched.step(7)
    assert p.read("step") == 7 and p.read("step_ns") != 0


def test_heartbeat_counts_and_stamps_the_time(cxxrun, page):
    before = monotonic_ns()
    cxxrun.heartbeat()
    cxxrun.heartbeat()
    after = monotonic_ns()
    assert page.read("beats") == 2
    assert before <= page.read("last_beat_ns") <= after
    assert page.read("step_ns") == 0  # a beat is no step


def test_step_writes_the_step_then_its_time_in_any_order(cxxrun, page):
    assert page.read("step_ns") == 0  # none reported yet
    before = monotonic_ns()
    cxxrun.step(0)
    assert page.read("step") == 0
    assert before <= page.read("step_ns") <= monotonic_ns()
    cxxrun.step(120)
    cxxrun.step(2**64 - 1)
    assert page.read("step") == 2**64 - 1
    cxxrun.step(100)  # a restart from a checkpoint goes back
    assert page.read("step") == 100
    assert page.read("beats") == 0  # a step is no beat
    assert page.read("last_beat_ns") == 0


def test_step_takes_what_python_calls_an_index():
    class Index:
        def __index__(self):
            return 9

    cxxrun = fresh_cxxrun()
    cxxrun.step(Index())


def test_a_section_fills_a_slot_under_its_sequence_lock(cxxrun, page):
    before = monotonic_ns()
    with cxxrun.section("step", timeout=2.5):
        assert page.read("active", 0) == 1
        assert page.read("name", 0) == "step"
        assert page.read("timeout_ns", 0) == 2_500_000_000
        assert before <= page.read("started_ns", 0) <= monotonic_ns()
        assert page.read("seq", 0) == 2  # even: written and published
    assert page.read("active", 0) == 0
    assert page.read("seq", 0) == 4


def test_a_section_without_a_timeout_has_no_deadline(cxxrun, page):
    with cxxrun.section("load"):
        assert page.read("timeout_ns", 0) == 0
        assert page.read("active", 0) == 1


def test_a_long_timeout_is_capped_as_the_c_abi_caps_it(cxxrun, page):
    with cxxrun.section("wait", timeout=float("inf")):
        assert page.read("timeout_ns", 0) == 10**9 * 60 * 60 * 24 * 365 * 100


def test_sections_nest_and_end_innermost_first(cxxrun, page):
    with cxxrun.section("outer", 60):
        with cxxrun.section("inner", 1):
            assert [page.read("name", k) for k in (0, 1)] == ["outer", "inner"]
            assert page.read("active", 0) == page.read("active", 1) == 1
        assert page.read("active", 1) == 0
        assert page.read("active", 0) == 1
        with cxxrun.section("inner", 1):  # the freed slot is taken again
            assert page.read("active", 1) == 1
    assert page.read("active", 0) == page.read("active", 1) == 0


def test_one_section_object_entered_twice_holds_two_slots(cxxrun, page):
    s = cxxrun.section("again")
    with s:
        with s:
            assert page.read("active", 0) == page.read("active", 1) == 1
        assert page.read("active", 1) == 0
        assert page.read("active", 0) == 1
    assert page.read("active", 0) == 0


def test_a_section_ends_when_an_exception_leaves_it(cxxrun, page):
    with pytest.raises(KeyError):
        with cxxrun.section("step"):
            raise KeyError("x")
    assert page.read("active", 0) == 0


def test_sections_past_the_slots_go_unwatched(cxxrun, page):
    sections = [cxxrun.section(f"s{k}") for k in range(LAYOUT.macros["SECTIONS"] + 2)]
    for s in sections:
        s.__enter__()
    assert page.read("name", LAYOUT.macros["SECTIONS"] - 1) == f"s{LAYOUT.macros['SECTIONS'] - 1}"
    for s in reversed(sections):
        s.__exit__(None, None, None)
    assert all(page.read("active", k) == 0 for k in range(LAYOUT.macros["SECTIONS"]))


# ---- the thread rule ----------------------------------------------------------

def test_a_section_from_another_thread_is_ignored_and_said_once(cxxrun, page, capfd):
    def side():
        for _ in range(3):
            with cxxrun.section("side", 1):
                pass

    in_thread(side)
    in_thread(side)
    assert page.read("seq", 0) == 0  # never written
    err = capfd.readouterr().err
    assert err.count("section() from a thread other than the main one is ignored") == 1


def test_a_side_thread_beat_counts_only_when_the_main_thread_moved(cxxrun, page):
    # The main thread blocks on a lock (same line, no CPU) that the side
    # thread releases after beating three times: only its first beat counts.
    gate = threading.Lock()
    gate.acquire()
    main = threading.main_thread().ident

    def wedged():
        gate.acquire()

    def side():
        try:
            for _ in range(3000):  # until the main thread is inside wedged()
                frame = sys._current_frames().get(main)
                if frame is not None and frame.f_code is wedged.__code__:
                    break
                time.sleep(0.01)
            for _ in range(3):
                cxxrun.heartbeat()
        finally:
            gate.release()

    t = threading.Thread(target=side)
    t.start()
    wedged()
    t.join(timeout=60)
    assert page.read("beats") == 1
    cxxrun.heartbeat()  # the main thread's own always counts
    assert page.read("beats") == 2


def test_a_step_from_another_thread_is_recorded(cxxrun, page, capfd):
    in_thread(lambda: cxxrun.step(17))
    assert page.read("step") == 17
    assert capfd.readouterr().err == ""


# ---- bad arguments ------------------------------------------------------------

@pytest.mark.parametrize("n", [-1, 2**64, 1.0, 2.5, "3", None, True, False, b"1"])
def test_a_bad_step_is_a_value_error_inside_and_outside(n, page, monkeypatch):
    for env in (True, False):
        if not env:
            monkeypatch.delenv(LAYOUT.macros["ENV"])
        cxxrun = fresh_cxxrun()
        with pytest.raises(ValueError) as e:
            cxxrun.step(n)
        assert repr(n) in str(e.value) and "a step is an int from 0 to 2**64-1" in str(e.value)
    assert page.read("step_ns") == 0


@pytest.mark.parametrize("name, rule", [
    ("", "is empty"),
    ("x" * NAME_MAX, f"is {NAME_MAX} bytes in UTF-8; the heartbeat page holds at most {NAME_MAX - 1}"),
    ("é" * (NAME_MAX // 2), f"is {NAME_MAX} bytes in UTF-8"),
    ("a\0b", "holds a NUL"),
    (b"step", "is not a str"),
    (None, "is not a str"),
    ("\udc80", "cannot be written in UTF-8"),
])
def test_a_bad_section_name_is_a_value_error(name, rule, outside):
    with pytest.raises(ValueError) as e:
        outside.section(name)
    assert repr(name) in str(e.value) and rule in str(e.value)


def test_the_longest_name_the_page_holds_is_taken(cxxrun, page):
    for name in ("x" * (NAME_MAX - 1), "é" * ((NAME_MAX - 1) // 2)):
        with cxxrun.section(name):
            assert page.read("name", 0) == name


@pytest.mark.parametrize("timeout", [0, -1, 0.0, float("nan"), True, "5", b"5", [1]])
def test_a_bad_timeout_is_a_value_error(timeout, cxxrun, page):
    with pytest.raises(ValueError) as e:
        cxxrun.section("step", timeout)
    assert repr(timeout) in str(e.value) and "is not a positive number of seconds" in str(e.value)
    assert page.read("seq", 0) == 0
