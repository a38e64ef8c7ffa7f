"""Structure-aware fuzzing of pageindex with mutated corpus files (candidate and oracle).

Four targets (tests/helpers/fuzz_runner.py): the Thrift decoder, the footer reader, the page walk
with level decoding (chunk_scan.scan_chunk, decode=False) and the full retrofit(dry_run=True),
which hands pyarrow synthesized files.  Every input runs in a worker process with an
address-space limit (RLIMIT_AS 4 GiB) and a per-input time bound (10 s); a worker handles many
inputs and reports one JSON line per input, so a crash or abort is attributed to its input.

Pass: only pageindex.errors.PageIndexError subclasses escape, no input takes longer than the
bound, no MemoryError, the worker never dies.

Mutations (tests/helpers/fuzz_mutations.py): flipped bytes and bits, truncations, huge Thrift
list/map/binary sizes, deep nesting, footer fields edited through pageindex.format.thrift
(decode -> edit -> encode: chunk offsets and sizes, index locations, counts, types, deleted and
duplicated elements), page header bytes and fields (pages found with pageindex.scan.page_walk), page
bodies, level streams and values (recompressed, with CRCs and offsets fixed so the rest of the
file still lines up).

Deterministic: input i of a target is a recipe drawn from random.Random(f"{seed}:{target}:{i}");
the seed is PAGEINDEX_FUZZ_SEED (default below).  By default a fixed number of inputs per target
runs (20-30 s on two idle cores); PAGEINDEX_FUZZ_SECONDS=N spends about N seconds in total
instead, continuing the same sequence.

Every failing input is kept under tests/regressions/ (the bytes when under 64 KiB, else the
recipe that rebuilds them) and replayed by test_regressions_replay.
"""
from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import time
from pathlib import Path

import pytest

from tests.helpers import fuzz_mutations as fm
from tests.helpers.fuzz_runner import FAILURES, run_inputs, run_parallel
from tests.helpers.paths import REGRESSIONS_DIR

SEED = int(os.environ.get("PAGEINDEX_FUZZ_SEED", "20260611"))
FUZZ_SECONDS = float(os.environ.get("PAGEINDEX_FUZZ_SECONDS", "0") or 0)
WORKERS = max(2, min(4, os.cpu_count() or 2))
SMALL_INPUT = 64 << 10
# The valid files mutated: corpus candidates and oracles up to this size (the few larger ones
# take seconds each unmutated), plus small synthetic files with nested columns and tiny pages.
MAX_SOURCE_BYTES = 128 << 10

COUNTS = {"thrift": 1500, "footer": 1200, "scan": 1200, "retrofit": 1600}
SHARES = {"thrift": 0.15, "footer": 0.2, "scan": 0.25, "retrofit": 0.4}
MUTATIONS = {
    "thrift": fm.THRIFT_KINDS,
    "footer": ("bytes", "bits", "truncate", "tail_length", "huge_list", "huge_container",
               "deep_nesting", "footer_field", "chunk_field", "chunk_field", "footer_delete",
               "footer_duplicate", "footer_type_swap"),
    "scan": ("chunk_field", "chunk_field", "page_header_bytes", "page_header_field",
             "page_header_field", "page_body_bytes", "level_stream", "level_stream",
             "level_stream", "cut_middle", "bytes"),
    "retrofit": fm.KINDS + ("level_stream", "value_bytes", "page_header_field", "chunk_field"),
}
SYNTHETIC = [f"synthetic:{name}" for name in fm.synthetic_files()]
POOL = fm.corpus_pool(MAX_SOURCE_BYTES) + SYNTHETIC
NESTED_POOL = fm.nested_pool(MAX_SOURCE_BYTES) + SYNTHETIC


def recipe(target: str, i: int, seed: int = SEED) -> dict:
    rng = random.Random(f"{seed}:{target}:{i}")
    kind = rng.choice(MUTATIONS[target])
    name = rng.choice(NESTED_POOL if kind == "level_stream" else POOL)
    return {"target": target, "file": name, "mutation": kind, "seed": rng.getrandbits(48)}


# ---------------------------------------------------------------- regressions

def _options(job: dict) -> dict:
    return job.get("options") or (fm.options(job) if job["target"] == "retrofit" else {})


def save_regression(job: dict, outcome: dict, found_by: str) -> Path:
    """Keep a failing input: bytes when small, else the recipe (and the hash it must rebuild)."""
    data = fm.build(job)
    sha = hashlib.sha256(data).hexdigest()
    REGRESSIONS_DIR.mkdir(exist_ok=True)
    stem = f"{job['target']}-{job['mutation']}-{sha[:12]}"
    entry_path = REGRESSIONS_DIR / f"{stem}.json"
    if entry_path.exists():
        return entry_path
    small = len(data) < SMALL_INPUT
    if small:
        (REGRESSIONS_DIR / f"{stem}.bin").write_bytes(data)
    entry = {
        "target": job["target"],
        "recipe": {k: job[k] for k in ("target", "file", "mutation", "seed")},
        "options": _options(job),
        "sha256": sha,
        "size": len(data),
        "bytes": f"{stem}.bin" if small else None,
        "found_by": found_by,
        "first_outcome": {k: outcome.get(k) for k in ("status", "type", "message", "returncode")},
        "traceback_tail": (outcome.get("traceback") or outcome.get("stderr") or "")[-1500:],
    }
    entry_path.write_text(json.dumps(entry, indent=2) + "\n")
    return entry_path


def regression_entries() -> list[Path]:
    return sorted(REGRESSIONS_DIR.glob("*.json")) if REGRESSIONS_DIR.is_dir() else []


def _failure_report(pairs: list[tuple[dict, dict]]) -> str:
    lines = []
    for job, rec in pairs[:12]:
        tb = (rec.get("traceback") or rec.get("stderr") or "").strip().splitlines()
        lines.append(f"- {fm.describe(job)} options={_options(job)}: {rec['status']} "
                     f"{rec.get('type') or ''} {(rec.get('message') or '')[:200]}"
                     + (f"\n    {tb[-3].strip()} | {tb[-1].strip()}" if len(tb) >= 3 else ""))
    if len(pairs) > 12:
        lines.append(f"... and {len(pairs) - 12} more")
    return "\n".join(lines)


# ---------------------------------------------------------------- the harness itself

@pytest.mark.fuzz
def test_harness_attributes_every_failure_to_its_input():
    """A worker that aborts, exhausts its memory limit, loops in Python or is stuck where the
    alarm cannot reach it: each failure is pinned on its input and the next input still runs."""
    good = recipe("thrift", 0)
    jobs = [good, {"target": "selftest:abort"}, good, {"target": "selftest:memory"},
            {"target": "selftest:slow", "seconds": 1}, good,
            {"target": "selftest:stuck", "seconds": 1}, good]
    out = run_inputs(jobs, per_input=1, grace=3)
    assert [r["status"] for r in out] == [
        out[0]["status"], "crashed", out[0]["status"], "error", "timeout", out[0]["status"], "hung",
        out[0]["status"]], out
    assert out[0]["status"] not in FAILURES
    assert out[1]["returncode"] == -6  # SIGABRT
    assert out[3]["type"] == "MemoryError"
    assert out[0]["sha256"] == out[2]["sha256"] == out[5]["sha256"] == out[7]["sha256"]


@pytest.mark.fuzz
def test_inputs_are_deterministic_across_processes():
    """The parent rebuilds exactly the bytes a worker tested (what regression recipes rely on)."""
    jobs = [recipe(target, i) for target in MUTATIONS for i in range(25)]
    out = run_inputs(jobs)
    checked = 0
    for job, rec in zip(jobs, out):
        if rec["status"] == "n/a":
            continue
        assert rec["status"] not in ("harness_error",), rec
        assert hashlib.sha256(fm.build(job)).hexdigest() == rec["sha256"], fm.describe(job)
        checked += 1
    assert checked >= 0.9 * len(jobs)


# ---------------------------------------------------------------- fuzzing

def _jobs(target: str, start: int, count: int) -> list[dict]:
    return [recipe(target, i) for i in range(start, start + count)]


@pytest.mark.fuzz
@pytest.mark.parametrize("target", list(MUTATIONS))
def test_fuzz(target):
    started = time.monotonic()
    pairs: list[tuple[dict, dict]] = []
    if FUZZ_SECONDS > 0:
        budget, batch = FUZZ_SECONDS * SHARES[target], 100 * WORKERS
        while time.monotonic() - started < budget:
            jobs = _jobs(target, len(pairs), batch)
            pairs += zip(jobs, run_parallel(jobs, workers=WORKERS))
    else:
        jobs = _jobs(target, 0, COUNTS[target])
        pairs += zip(jobs, run_parallel(jobs, workers=WORKERS))
    elapsed = time.monotonic() - started

    harness = [(j, r) for j, r in pairs if r["status"] == "harness_error"]
    assert not harness, "mutation builders failed:\n" + _failure_report(harness)
    failed = [(j, r) for j, r in pairs if r["status"] in FAILURES]
    for i, (job, rec) in enumerate(pairs):
        if rec["status"] in FAILURES:
            save_regression(job, rec, f"PAGEINDEX_FUZZ_SEED={SEED} {target} input {i}")

    statuses = collections.Counter(r["status"] for _, r in pairs)
    kinds = collections.Counter(j["mutation"] for j, r in pairs if r["status"] != "n/a")
    print(f"\nfuzz {target}: {len(pairs)} inputs in {elapsed:.1f}s, {dict(statuses)}")
    assert not failed, (
        f"{len(failed)} of {len(pairs)} inputs escaped with something other than a "
        f"PageIndexError (kept under {REGRESSIONS_DIR}):\n" + _failure_report(failed))

    # The fuzz must reach past the first check: outcomes are mixed, every mutation applies.
    assert statuses["n/a"] < 0.1 * len(pairs), statuses
    assert set(kinds) == set(MUTATIONS[target]), kinds
    assert statuses["ok"] > 0.05 * len(pairs) and statuses["pageindex_error"] > 0.05 * len(pairs) \
        or target == "scan", statuses
    if target == "scan":
        reasons = " ".join(" ".join(r.get("reasons", [])) for _, r in pairs)
        refused = sum(bool(r.get("chunks_refused")) for _, r in pairs)
        assert refused > 0.2 * len(pairs), refused
        for expected in ("level", "page header", "CRC"):
            assert expected in reasons, f"no chunk refused for a reason mentioning {expected!r}"


@pytest.mark.fuzz
def test_regressions_replay():
    """Every input that once failed runs again through its target and must now pass."""
    entries = [(p, json.loads(p.read_text())) for p in regression_entries()]
    if not entries:
        return
    jobs = []
    for path, e in entries:
        job = {"target": e["target"], "options": e.get("options") or None}
        if e.get("bytes"):
            bin_path = REGRESSIONS_DIR / e["bytes"]
            assert hashlib.sha256(bin_path.read_bytes()).hexdigest() == e["sha256"], path.name
            job["bytes_path"] = str(bin_path)
        else:
            job.update(e["recipe"])
        jobs.append(job)
    out = run_parallel(jobs, workers=WORKERS)
    bad = []
    for (path, e), rec in zip(entries, out):
        if rec.get("sha256") and rec["sha256"] != e["sha256"]:
            bad.append(f"{path.name}: the recipe no longer rebuilds the failing input")
        elif rec["status"] not in ("ok", "pageindex_error"):
            bad.append(f"{path.name}: {rec['status']} {rec.get('type') or ''} "
                       f"{(rec.get('message') or '')[:200]}")
    assert not bad, f"{len(bad)} of {len(entries)} regression inputs still fail:\n" + "\n".join(bad)


# ---------------------------------------------------------------- findings: minimal repros
# Each of these reproduces, by hand and in-process, a class of failures the fuzz found (their
# fuzz inputs are kept under tests/regressions/).

from pageindex.errors import MalformedFileError, PageIndexError  # noqa: E402
from pageindex.format.thrift import Field, Struct, T, TList, decode_struct, encode_struct  # noqa: E402
from pageindex.scan.page_walk import page_from_header  # noqa: E402


@pytest.mark.parametrize("kind,sub_id", [(0, 5), (2, 7), (3, 8)], ids=["v1", "dictionary", "v2"])
def test_page_header_whose_sub_header_is_not_a_struct_is_malformed(kind, sub_id):
    """A PageHeader whose data_page_header / dictionary_page_header / data_page_header_v2
    field holds an integer (one flipped type nibble does it) must be refused as malformed,
    not end in AttributeError ('int' object has no attribute 'get') in page_walk._int."""
    header = Struct((Field(1, T.I32, kind), Field(2, T.I32, 10), Field(3, T.I32, 10),
                     Field(sub_id, T.I32, 7)))
    with pytest.raises(MalformedFileError):
        page_from_header(header, 4, 12)


def _top(field_id, ttype, value):
    return lambda meta: meta.set(field_id, ttype, value)


def _leaf(field_id, ttype, value):
    """Change a field of the first leaf's SchemaElement ("id", INT32, in alltypes_plain)."""
    def mutate(meta):
        schema = meta.get(2)
        items = list(schema.items)
        items[1] = items[1].set(field_id, ttype, value)
        return meta.set(2, T.LIST, TList(schema.elem_type, tuple(items)))
    return mutate


FOOTER_TYPE_CASES = {
    # FileMetaData field 5 key_value_metadata, 6 created_by, 7 column_orders
    "key_value_metadata=i32(1)": (_top(5, T.I32, 1), {}),
    "key_value_metadata=i32(0)": (_top(5, T.I32, 0), {}),
    "key_value_metadata=list<i32>": (_top(5, T.LIST, TList(T.I32, (1, 2))), {}),
    "created_by=list<i32>": (_top(6, T.LIST, TList(T.I32, (1,))), {}),
    "created_by=i32": (_top(6, T.I32, 5), {}),
    "created_by=i32,trust_page_stats": (_top(6, T.I32, 5), {"trust_page_stats": True}),
    "column_orders=i32": (_top(7, T.I32, 5), {}),
    # SchemaElement 10 logicalType: the INTEGER member (10) holding a binary, not a struct
    "logicalType.INTEGER=binary": (_leaf(10, T.STRUCT, Struct((Field(10, T.BINARY, b"x"),))), {}),
    # SchemaElement 1 type as an i64 (same value): pageindex accepts it and copies the field
    # into the file it hands pyarrow, which then has no column -> IndexError in values.decode
    "schema.type=i64": (_leaf(1, T.I64, 1), {}),
}


@pytest.mark.parametrize("case", list(FOOTER_TYPE_CASES))
def test_footer_field_of_unexpected_type_is_malformed(case, tmp_path):
    """Footer fields whose Thrift type is not the one parquet.thrift gives them reach code that
    assumes it: AttributeError or TypeError (Footer.key_value, Footer.created_by,
    writer._with_marker, retrofit.compute_indexes, column_order._integer_order, the encoder in
    values.synthesize) or IndexError (values.decode) instead of a MalformedFileError."""
    mutate, options = FOOTER_TYPE_CASES[case]
    data = fm.source_bytes("parquet-testing/data/alltypes_plain.parquet")
    start, raw = fm.split(data)
    meta, _ = decode_struct(raw)
    path = tmp_path / "f.parquet"
    path.write_bytes(fm.assemble(data, start, encode_struct(mutate(meta))))
    import pageindex

    try:
        pageindex.retrofit(str(path), dry_run=True, force=True, **options)
    except PageIndexError:
        pass  # refusing the file is right; indexing it anyway would be too
    except Exception as err:  # noqa: BLE001
        pytest.fail(f"{type(err).__name__}: {err}")
