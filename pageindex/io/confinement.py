"""Confinement: what lies inside an input, so that a run touches only what it was given.

Table paths are normalised against their root; local symbolic links are resolved against the input's real path.
"""
from __future__ import annotations

import os
import posixpath


def escapes(relative: str) -> bool:
    """Does the (decoded) relative path lead outside the directory it is relative to, once
    normalised (`../x`, `a/../../x`)? An absolute path always does."""
    if relative.startswith("/"):
        return True
    normal = posixpath.normpath(relative)
    return normal == ".." or normal.startswith("../")


def below(root: str, url: str) -> bool:
    """Is `url`, normalised, strictly below the directory `root` (both URLs of one scheme, or
    both paths)? `s3://b/t/../x` is not below `s3://b/t`."""
    scheme, sep, rest = url.partition("://")
    root_scheme, root_sep, root_rest = root.partition("://")
    if (scheme if sep else "") != (root_scheme if root_sep else ""):
        return False
    path, top = (rest, root_rest) if sep else (url, root)
    path, top = posixpath.normpath("/" + path), posixpath.normpath("/" + top)
    return path.startswith(top.rstrip("/") + "/")


def outside(path: str, real_root: str | None) -> str | None:
    """Where the local `path` really is (links resolved) when that is outside the real path
    `real_root`, else None (also with no root: nothing confined)."""
    if real_root is None:
        return None
    real = os.path.realpath(path)
    return None if real == real_root or real.startswith(real_root.rstrip("/") + "/") else real
