"""``traceforensics.capture()`` (issue 16): a CPU training loop with a slow data loader is
recorded with the analysis' defaults, and ``tf`` reads back the steps and the loader ranges.

On CPU there is no GPU idle time to attribute, so the checks read the recorded session: the
``ProfilerStep`` numbers (the schedule skipped wait + warmup), the loader ranges (at least the
injected sleeps), and that ``tf`` classifies those ranges as ``data_loading``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest

import traceforensics
from traceforensics.analysis.classify import classify_host
from traceforensics.analysis.idle.causes import CAUSE_INDEX, DATA_LOADING
from traceforensics.model.errors import InputError, OptionError
from traceforensics.model.session import TraceSession
from traceforensics.recording.settings import INSTALL_HINT

torch = pytest.importorskip("torch")

TRAIN_SMALL = Path(__file__).resolve().parent / "data" / "train_small.py"
SLEEP_S = 0.002
BATCH = 4  # train_small.BATCH
STEP_RE = r"^ProfilerStep#(\d+)$"
LOADER_RE = r"^enumerate\(DataLoader\)#"


def _train_small() -> ModuleType:
    """``tests/data/train_small.py`` as a module (its dataset and model, not its main)."""
    spec = importlib.util.spec_from_file_location("train_small", TRAIN_SMALL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loop(steps: int) -> tuple[Any, Any, Any]:
    """(slow DataLoader of ``steps`` batches, model, optimizer) of train_small's kind."""
    data = torch.utils.data.DataLoader(
        _train_small().SlowDataset(steps * BATCH, SLEEP_S), batch_size=BATCH
    )
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    return data, model, torch.optim.SGD(model.parameters(), lr=0.01)


def _train(model: Any, opt: Any, x: Any, y: Any) -> None:
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()


def _ranges(session: TraceSession, pattern: str) -> pl.DataFrame:
    return (
        session.events.with_columns(pl.col("name").cast(pl.String))
        .filter(pl.col("name").str.contains(pattern))
        .sort("start_ns")
    )


def _step_numbers(session: TraceSession) -> list[int]:
    steps = _ranges(session, STEP_RE)
    return [int(n) for n in steps.get_column("name").str.extract(STEP_RE, 1).to_list()]


def test_importing_traceforensics_does_not_import_torch() -> None:
    code = (
        "import sys, traceforensics; f = traceforensics.capture; "
        "assert callable(f) and 'torch' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_slow_loader_loop_is_recorded_with_steps_and_loader_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, model, opt = _loop(12)
    with traceforensics.capture(tmp_path / "prof") as cap:
        for x, y in cap.loader(data):
            _train(model, opt, x, y)
    out = capsys.readouterr().out
    trace = tmp_path / "prof" / "rank-0.pt.trace.json.gz"
    assert cap.traces == [trace] and cap.steps == 12
    session = traceforensics.load(trace)
    assert _step_numbers(session) == [4, 5, 6, 7, 8]  # wait 2 + warmup 2 skipped, 5 active
    steps = _ranges(session, STEP_RE)
    loads = _ranges(session, LOADER_RE)
    # one fetch per step, each inside its step, each at least its 4 sleeping samples long
    assert loads.height == 5
    for (s0, d0), (l0, dl) in zip(
        steps.select("start_ns", "dur_ns").iter_rows(),
        loads.select("start_ns", "dur_ns").iter_rows(),
        strict=True,
    ):
        assert s0 <= l0 and l0 + dl <= s0 + d0
        assert dl >= BATCH * SLEEP_S * 1e9
    assert int(loads.get_column("dur_ns").sum()) >= 5 * BATCH * SLEEP_S * 1e9
    # what the user sees: the steps, the verdict of a CPU-only trace, the loader's host share
    assert cap.analysis is not None and cap.analysis.devices == []
    assert out.startswith(f"tf capture: recorded steps #4-#8 (5) into {trace} (")
    assert "No GPU activity in this trace (CPU-only)" in out
    assert "host: data loading " in out and "over 5 recorded steps" in out
    assert out.rstrip().endswith(f"full report: tf analyze {trace.parent}")
    assert cap.report == out


def test_loader_ranges_are_data_loading_for_tf(tmp_path: Path) -> None:
    """A plain iterable gets PyTorch's DataLoader range name, and ``tf`` classifies it (and
    the DataLoader's own) as data_loading whatever the user's data words are."""
    _, model, opt = _loop(0)
    batches = ((torch.randn(BATCH, 64), torch.randn(BATCH, 8)) for _ in range(10))
    with traceforensics.capture(tmp_path, print_verdict=False) as cap:
        for x, y in cap.loader(batches):
            _train(model, opt, x, y)
    session = traceforensics.load(cap.traces[0])
    names = set(_ranges(session, LOADER_RE).get_column("name"))
    assert names == {"enumerate(DataLoader)#generator.__next__"}
    host = pl.DataFrame(
        {
            "kind": ["annotation", "annotation"],
            "name": [*names, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"],
            "is_comm": [False, False],
            "blocking_d2h": [False, False],
        }
    )
    causes = classify_host(host, data_patterns=("nothing_like_it",)).to_list()
    assert causes == [CAUSE_INDEX[DATA_LOADING]] * 2


def test_step_calls_and_rank_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")  # torchrun's variable, torch.distributed not initialised
    _, model, opt = _loop(0)
    with traceforensics.capture(tmp_path, wait=1, warmup=1, active=2, gzip=False) as cap:
        for _ in range(6):
            _train(model, opt, torch.randn(BATCH, 64), torch.randn(BATCH, 8))
            cap.step()
    assert cap.traces == [tmp_path / "rank-3.pt.trace.json"]
    session = traceforensics.load(tmp_path)
    assert _step_numbers(session) == [2, 3]
    assert session.meta.inputs[0].rank == 3


def test_repeat_writes_one_folder_per_cycle(tmp_path: Path) -> None:
    _, model, opt = _loop(0)
    with traceforensics.capture(
        tmp_path, wait=0, warmup=1, active=1, repeat=2, print_verdict=False
    ) as cap:
        for _ in range(5):
            _train(model, opt, torch.randn(BATCH, 64), torch.randn(BATCH, 8))
            cap.step()
    assert cap.traces == [tmp_path / f"cycle-{k}" / "rank-0.pt.trace.json.gz" for k in (1, 2)]
    assert [_step_numbers(traceforensics.load(p)) for p in cap.traces] == [[1], [3]]
    assert cap.analysis is not None
    assert cap.analysis.session.meta.inputs[0].path == str(cap.traces[1])


def test_too_few_steps_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err, traceforensics.capture(tmp_path) as cap:
        for _ in range(3):
            cap.step()
    assert str(err.value) == (
        "no trace was recorded: the run made 3 step() calls, and the schedule records steps "
        "#4-#8 (after wait 2 + warmup 2); run more steps or lower wait/warmup"
    )


def test_window_cut_short_is_kept_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with traceforensics.capture(tmp_path, analyze=False) as cap:
        for _ in range(6):
            cap.step()
    shown = capsys.readouterr()
    assert cap.analysis is None and shown.out == ""
    assert _step_numbers(traceforensics.load(cap.traces[0])) == [4, 5, 6]
    assert shown.err == (
        "tf capture: the run ended inside the active window: 2 of 5 steps recorded whole "
        "(#4-#5), #6 only runs to the end; make 9 steps or more\n"
    )


def test_an_error_in_the_block_propagates_unanalysed(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), traceforensics.capture(tmp_path) as cap:
        for _ in range(5):
            cap.step()
        _ = 1 / 0
    assert cap.analysis is None and cap.traces  # stopped inside the window: written


@pytest.mark.parametrize(
    ("settings", "option"),
    [({"active": 0}, "active"), ({"wait": -1}, "wait"), ({"gzip": "yes"}, "gzip"),
     ({"shapes": True}, "shapes")],
)  # fmt: skip
def test_bad_settings_name_the_setting(settings: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as err:
        traceforensics.capture("unused", **settings)
    assert err.value.option == option and "\n" not in str(err.value)


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now fails
    with pytest.raises(InputError) as err:
        traceforensics.capture("unused")
    assert str(err.value).endswith(INSTALL_HINT) and "\n" not in str(err.value)


def test_two_stepping_loaders_are_refused(tmp_path: Path) -> None:
    with traceforensics.capture(tmp_path, analyze=False) as cap:
        cap.loader([1, 2])
        with pytest.raises(InputError, match="step=False"):
            cap.loader([3, 4])
        for _ in range(9):
            cap.step()
