"""pageindex.io.temporaries: a stop request inside `held` waits for the block's end; temporaries
in flight are removed at exit, and only our own file under each name."""
from __future__ import annotations

import subprocess
import sys

from tests.helpers.paths import REPO_ROOT


def _run(program: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=60, check=False)


def test_sigterm_inside_held_waits_for_the_end_of_the_block():
    program = ("import os, signal\n"
               "from pageindex.io import temporaries\n"
               "from pageindex.shutdown import Terminated, stops_cleanly\n"
               "steps = []\n"
               "@stops_cleanly\n"
               "def work():\n"
               "    with temporaries.held():\n"
               "        os.kill(os.getpid(), signal.SIGTERM)\n"
               "        for _ in range(100000):\n"
               "            pass\n"
               "        steps.append('block ended')\n"
               "    steps.append('went on')\n"
               "try:\n"
               "    work()\n"
               "except Terminated:\n"
               "    print(steps, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)\n")
    run = _run(program)
    assert run.stdout.strip() == "['block ended'] True", run.stderr


def test_leave_removes_temporaries_in_flight_but_not_a_file_put_in_their_place(tmp_path):
    ours, replaced = tmp_path / ".a.pageindex-tmp-1", tmp_path / ".b.pageindex-tmp-2"
    program = ("import os\n"
               "from pageindex.io import temporaries\n"
               "from pageindex.shutdown import leave\n"
               f"for name in ({str(ours)!r}, {str(replaced)!r}):\n"
               "    open(name, 'wb').close()\n"
               "    temporaries.record(name, os.lstat(name).st_ino)\n"
               # another file renamed over the second (made first: it cannot reuse the inode)
               f"open({str(replaced)!r} + '.x', 'wb').close()\n"
               f"os.replace({str(replaced)!r} + '.x', {str(replaced)!r})\n"
               "leave(0)\n")
    run = _run(program)
    assert run.returncode == 0, run.stderr
    assert not ours.exists() and replaced.exists()
