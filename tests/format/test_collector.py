"""format.collector: the cycle collector's pause nests, overlaps across threads and restores
what the caller had."""
from __future__ import annotations

import gc
import threading

import pytest

from pageindex.format import collector


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_collector_is_paused_inside_and_restored_after(collector_on):
    with collector.collector_paused():
        assert not gc.isenabled()
        with collector.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still runs
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with collector.collector_paused():
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off(collector_on):
    gc.disable()
    with collector.collector_paused():
        pass
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_restore_the_collector_when_the_last_ends(collector_on):
    # Thread A pauses, B pauses, A ends (B still runs: still paused), B ends: back on.
    a_in, b_in, a_out, b_may_end = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with collector.collector_paused():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with collector.collector_paused():
            b_in.set()
            a_out.wait(5)
            seen["after A ended"] = gc.isenabled()
            b_may_end.wait(5)

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    a_out.wait(5)
    b_may_end.set()
    for t in threads:
        t.join(5)
    assert seen == {"after A ended": False}
    assert gc.isenabled()
