"""In-place commits of one file by writers on one machine take turns (commit._commit_lock): a
second writer's check waits for the first's exchange, and a lock held too long is refused."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import pageindex
import pageindex.io.commit as commit_mod
from pageindex.errors import ConcurrentModificationError
from pageindex.verify import verify


@pytest.fixture
def src(tmp_path) -> Path:
    path = tmp_path / "t.parquet"
    table = pa.table({"k": np.arange(20_000, dtype=np.int64), "s": [f"v{i}" for i in range(20_000)]})
    pq.write_table(table, path, data_page_size=4096, write_page_index=False)
    return path


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if commit_mod.TEMP_TAG in p.name]


def test_second_writer_checks_after_the_first_has_swapped_in(src, monkeypatch):
    """Interleaved, three writers' exchanges can leave finished files under temporary names that
    no one removes. Here the first writer pauses inside its exchange; the second reaches the lock
    and waits, and checks the file only once the first is done: it then refuses (the file is the
    first's now) and nothing is left behind."""
    first_inside, go_on, second_waits = threading.Event(), threading.Event(), threading.Event()
    checked_while_paused: dict[str, bool] = {}
    real_exchange, real_check, real_flock = commit_mod._exchange, commit_mod.check_unchanged, commit_mod._flock

    def exchange(a: str, b: str) -> bool:
        if threading.current_thread().name == "first" and not first_inside.is_set():
            first_inside.set()
            assert go_on.wait(60)
        return real_exchange(a, b)

    def check(source) -> None:
        checked_while_paused[threading.current_thread().name] = first_inside.is_set() and not go_on.is_set()
        real_check(source)

    def flock(fd: int, path: str) -> None:
        if threading.current_thread().name == "second":
            second_waits.set()
        real_flock(fd, path)

    monkeypatch.setattr(commit_mod, "_exchange", exchange)
    monkeypatch.setattr(commit_mod, "check_unchanged", check)
    monkeypatch.setattr(commit_mod, "_flock", flock)
    outcomes: dict[str, object] = {}

    def run() -> None:
        try:
            outcomes[threading.current_thread().name] = pageindex.retrofit(str(src)).status
        except ConcurrentModificationError as err:
            outcomes[threading.current_thread().name] = err

    first = threading.Thread(target=run, name="first")
    first.start()
    assert first_inside.wait(60)
    second = threading.Thread(target=run, name="second")
    second.start()
    assert second_waits.wait(60)
    second.join(0.5)  # without the lock it would check and exchange now, while the first is paused
    go_on.set()
    first.join(60)
    second.join(60)
    assert outcomes["first"] == "indexed"
    assert isinstance(outcomes["second"], ConcurrentModificationError)
    assert "changed" in str(outcomes["second"])
    assert checked_while_paused == {"first": False, "second": False}
    assert leftovers(src.parent) == []
    assert verify(str(src)).ok


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_a_lock_another_process_holds_too_long_is_refused_and_the_file_kept(src, monkeypatch):
    monkeypatch.setattr(commit_mod, "LOCK_WAIT_SECONDS", 0.3)
    before = src.read_bytes()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(src)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ConcurrentModificationError, match="held a lock") as caught:
            pageindex.retrofit(str(src))
        assert str(src) in str(caught.value)
        assert src.read_bytes() == before
        assert leftovers(src.parent) == []
    finally:
        holder.communicate("")
    assert pageindex.retrofit(str(src)).status == "indexed"  # the lock released, the commit goes on
    assert verify(str(src)).ok
