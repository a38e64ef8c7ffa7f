"""Opening a file ahead (pageindex.format.opened) on the moto S3 server: what take() gives or
raises is what opening the file then would."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pageindex.errors import NotParquetError, StorageError
from pageindex.format.opened import OpenAhead, open_file


def test_take_gives_the_file_or_raises_its_own_error(s3fs_fs, s3_bucket, tmp_path):
    pq.write_table(pa.table({"x": list(range(1000))}), tmp_path / "a.parquet")
    s3fs_fs.put(str(tmp_path / "a.parquet"), f"{s3_bucket}/a.parquet")
    s3fs_fs.pipe(f"{s3_bucket}/notes.parquet", b"not parquet at all")
    with ThreadPoolExecutor(1) as pool:
        good, missing, notes = (OpenAhead(pool, f"{s3_bucket}/{name}", s3fs_fs)
                                for name in ("a.parquet", "gone.parquet", "notes.parquet"))
        opened, now = good.take(), open_file(f"{s3_bucket}/a.parquet", s3fs_fs)
        assert opened.footer == now.footer and opened.source.version == now.source.version
        assert opened.footer.row_group_rows == (1000,)
        opened.source.close()
        now.source.close()
        with pytest.raises(StorageError) as err:
            missing.take()
        assert err.value.path == f"{s3_bucket}/gone.parquet"
        with pytest.raises(NotParquetError) as err:
            notes.take()
        assert err.value.path == f"{s3_bucket}/notes.parquet"
