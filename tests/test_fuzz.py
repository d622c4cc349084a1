"""Fuzz suite, fast profile (issue 10): mutated real traces, nsys exports and monitoring logs
(``tools/fuzz_cases.py``). Every case ends with exit 0, or exit 2 and one line saying what to do;
no internal error; the input, its mtime and its folder listing are unchanged.

Runs in ``make test`` with ``TF_FUZZ_EXAMPLES`` cases per family (default 25, derandomised so
CI is reproducible). The long profile (``make fuzz-long``, ``tools/fuzz_long.py``) runs each
family in its own process with a per-case time limit and a peak-RSS check (docs/reliability.md).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_cases
import fuzz_runs
from tests.conftest import run_cli

EXAMPLES = int(os.environ.get("TF_FUZZ_EXAMPLES", "25"))


@pytest.mark.parametrize("family", fuzz_runs.ALL_FAMILIES)
def test_mutated_inputs(family: str, capsys: pytest.CaptureFixture[str]) -> None:
    seen: dict[str, int] = {}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(seed=st.integers(min_value=0, max_value=10**9))
    def case(seed: int) -> None:
        with tempfile.TemporaryDirectory(prefix="tf-fuzz-") as tmp:
            folder = Path(tmp)
            run = fuzz_runs.build_case(family, seed, folder)
            before = fuzz_runs.watch(run)
            with fuzz_runs.applied(run):
                code, _out, err = run_cli(run.argv, capsys)
            outcome = fuzz_cases.verdict(code, err)
            seen[outcome] = seen.get(outcome, 0) + 1
            assert outcome in ("ok", "refused"), f"{family} seed {seed}: {outcome}: {err}"
            after = fuzz_runs.check_after(run, before)
            fuzz_runs.unlock(folder)
            assert after is None, f"{family} seed {seed}: {after}"

    case()
    assert sum(seen.values()) >= min(EXAMPLES, 10), seen
