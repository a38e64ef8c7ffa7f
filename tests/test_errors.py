"""pageindex.errors: what each error means for a scheduler (the exit codes shared by the CLI and the job)."""
from __future__ import annotations

import pytest

from pageindex import errors as e
from pageindex.query.predicate import PredicateError


@pytest.mark.parametrize("err, code", [
    (e.MalformedFileError("bad footer"), 3),
    (e.NotParquetError("no magic"), 3),
    (e.ThriftTruncatedError("cut"), 3),
    (e.EncryptedFileError("PARE"), 3),
    (e.UnsupportedFileError("LZO"), 3),
    (e.StorageError("503 SlowDown"), 1),
    (e.ConcurrentModificationError("changed"), 3),
    (e.MissingInputError("input does not exist"), 2),
    (e.OutputRefusedError("exists"), 2),
    (e.UsageError("--max-failures"), 2),
    (PredicateError("k = "), 2),
    (OSError("disk full"), 1),
    (MemoryError(), 1),
    (KeyError("a bug"), 3),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v))
def test_exit_code_per_class(err, code):
    assert e.exit_code(err) == code
    assert e.retryable(err) is (code == 1)


def test_located_copy_keeps_the_class_and_its_meaning():
    err = e.StorageError("read failed").located(path="s3://b/k")
    assert type(err) is e.StorageError and err.retryable and err.path == "s3://b/k"


def test_failures_exit_code():
    assert e.failures_exit_code([]) == 0
    assert e.failures_exit_code([False, True], allowed=2) == 0
    assert e.failures_exit_code([False]) == 3
    assert e.failures_exit_code([False, True, False]) == 1
    assert e.failures_exit_code([False, False], allowed=1) == 3


def test_combined_exit_code():
    assert e.combined_exit_code([]) == 0
    assert e.combined_exit_code([0, 3, 1]) == 1  # a retry mends the 1, then reports the 3
    assert e.combined_exit_code([3, 0]) == 3
    assert e.combined_exit_code([1, 2]) == 2
