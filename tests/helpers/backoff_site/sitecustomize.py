"""Test-only: scales botocore's retry backoff in processes the tests cannot patch directly
(Spark's Python workers), when PAGEINDEX_TEST_BACKOFF_SCALE is set.  The retry policy itself
(which errors, how many attempts, the exponential jittered delay botocore computes) is untouched;
only the time actually slept is multiplied by the scale.  tests/system/test_s3_faults.py puts this
directory on the workers' PYTHONPATH for its permanent-fault job test only."""
import os

_scale = os.environ.get("PAGEINDEX_TEST_BACKOFF_SCALE")
if _scale:
    try:
        import botocore.retries.standard as _standard

        _real_delay = _standard.ExponentialBackoff.delay_amount

        def _scaled_delay(self, context, _real=_real_delay, _k=float(_scale)):
            return _real(self, context) * _k

        _standard.ExponentialBackoff.delay_amount = _scaled_delay
    except ImportError:
        pass
