"""`pageindex retrofit` in a child process that stops itself after N files, for the run state's
crash tests (tests/job/test_state.py).

    python -m tests.helpers.state_crash_runner --after N --signal KILL|TERM [--checkpoint-files K] -- ARGS...

ARGS are `pageindex retrofit`'s. After N files are processed (their records taken by the command)
the child sends itself the signal before the next one: SIGKILL ends it on the spot, as a lost
machine would; SIGTERM unwinds it as a supervisor's stop does. --checkpoint-files sets how many
decided files make a checkpoint (job.state.CHECKPOINT_FILES).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--after", type=int, required=True)
    p.add_argument("--signal", choices=["KILL", "TERM"], required=True)
    p.add_argument("--checkpoint-files", type=int, default=None)
    p.add_argument("args", nargs=argparse.REMAINDER)
    opts = p.parse_args()
    import pageindex.cli as cli
    import pageindex.cli.commands as commands
    import pageindex.job.state as state

    if opts.checkpoint_files is not None:
        state.CHECKPOINT_FILES = opts.checkpoint_files
    real = commands.process_task

    def stopping(targets, options):
        for i, record in enumerate(real(targets, options)):
            if i == opts.after:
                print(f"STOPPING after {i} files", flush=True)
                os.kill(os.getpid(), getattr(signal, f"SIG{opts.signal}"))
            yield record

    commands.process_task = stopping
    sys.argv = ["pageindex", *[a for a in opts.args if a != "--"]]
    cli.console()


if __name__ == "__main__":
    main()
