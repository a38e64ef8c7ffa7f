"""pageindex: give existing Parquet files exact page indexes without rewriting their data.

Public API: retrofit (add indexes), verify (check them), lookup (read only needed pages).
"""
from pageindex.errors import (  # noqa: E402
    ConcurrentModificationError,
    EncryptedFileError,
    MalformedFileError,
    NotParquetError,
    PageIndexError,
    StorageError,
    UnsupportedFileError,
)
from pageindex.query.lookup import LookupStats, lookup  # noqa: E402
from pageindex.retrofit import RetrofitResult, retrofit  # noqa: E402
from pageindex.verify import VerifyResult, verify  # noqa: E402
from pageindex.version import __version__  # noqa: E402

__all__ = [
    "retrofit", "RetrofitResult", "lookup", "LookupStats", "verify", "VerifyResult", "PageIndexError", "MalformedFileError", "EncryptedFileError",
    "UnsupportedFileError", "NotParquetError", "StorageError", "ConcurrentModificationError", "__version__",
]
