"""pageindex: give existing Parquet files exact page indexes without rewriting their data.

Public API: retrofit (add indexes), and the error types in pageindex.errors.
"""
__version__ = "0.1.0"

from .errors import (  # noqa: E402
    ConcurrentModificationError, EncryptedFileError, MalformedFileError, NotParquetError, PageIndexError,
    StorageError, UnsupportedFileError,
)
from .retrofit import RetrofitResult, retrofit  # noqa: E402

__all__ = [
    "retrofit", "RetrofitResult", "PageIndexError", "MalformedFileError", "EncryptedFileError",
    "UnsupportedFileError", "NotParquetError", "StorageError", "ConcurrentModificationError", "__version__",
]
