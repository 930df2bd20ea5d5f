"""Issue #22: every size that drives work is checked against a named limit before the work."""

from __future__ import annotations

import shutil
import time
import zipfile
from pathlib import Path

import numpy as np
import numpy.lib.format as npy_format
import pytest
import yaml

from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment
from mjsysid.data.recording import read_columns
from mjsysid.data.timeseries_files import check_npz_headers
from mjsysid.util import limits
from mjsysid.util.errors import short_repr
from mjsysid.util.limits import check_limit, get_limit, limits_set, set_limits


@pytest.fixture(autouse=True)
def _restore_limits():
    """Limits set by a test (or its experiment's ``limits:`` key) end with it."""
    before = dict(limits._overrides)
    yield
    limits._overrides.clear()
    limits._overrides.update(before)


@pytest.fixture
def box(tmp_path: Path) -> Path:
    """A copy of the bundled box example (1000 samples, 2 s at 2 ms)."""
    shutil.copytree(bundled_examples()["box"].parent, tmp_path / "box")
    return tmp_path / "box"


def _edit(box: Path, **top: object) -> Path:
    exp = box / "experiment.yaml"
    data = yaml.safe_load(exp.read_text())
    data.update(top)
    exp.write_text(yaml.safe_dump(data))
    return exp


def _edit_sequence(box: Path, **keys: object) -> Path:
    exp = box / "experiment.yaml"
    data = yaml.safe_load(exp.read_text())
    data["sequences"][0].update(keys)
    exp.write_text(yaml.safe_dump(data))
    return exp


def _set_last_time(box: Path, value: str) -> None:
    csv = box / "push.csv"
    lines = csv.read_text().splitlines()
    fields = lines[-1].split(",")
    fields[0] = value
    lines[-1] = ",".join(fields)
    csv.write_text("\n".join(lines) + "\n")


# --- the table and its overrides ---------------------------------------------------------


def test_check_limit_names_input_number_limit_and_remedy():
    pattern = (
        r"'run\.csv': rows: 3,000,000 exceeds the limit max_rows=2,000,000 "
        r".*limits: \{max_rows: N\}.*MJSYSID_LIMITS"
    )
    with pytest.raises(ValueError, match=pattern):
        check_limit("max_rows", 3_000_000, "'run.csv': rows")
    check_limit("max_rows", 2_000_000, "ok")


def test_nan_and_inf_are_over_every_limit():
    for value in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="exceeds the limit max_steps"):
            check_limit("max_steps", value, "x")


def test_limits_raised_in_code_and_restored():
    default = get_limit("max_windows")
    with limits_set(max_windows=10 * default):
        assert get_limit("max_windows") == 10 * default
        check_limit("max_windows", 5 * default, "x")
    assert get_limit("max_windows") == default


def test_limits_from_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(limits.ENV_VAR, "max_rows=5e7, max_windows=7")
    assert get_limit("max_rows") == 50_000_000
    assert get_limit("max_windows") == 7
    monkeypatch.setenv(limits.ENV_VAR, "max_rowz=5")
    with pytest.raises(ValueError, match=r"MJSYSID_LIMITS: unknown limit 'max_rowz'"):
        get_limit("max_rows")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "many", True])
def test_a_bad_limit_value_is_refused(bad: object):
    with pytest.raises(ValueError, match="limit max_rows must be a positive finite number"):
        set_limits({"max_rows": bad})


# --- recording files -----------------------------------------------------------------


def _npz_claiming(path: Path, shape: tuple[int, ...]) -> Path:
    """An npz whose ``time`` header claims ``shape`` but stores only a few bytes."""
    with zipfile.ZipFile(path, "w") as z, z.open("time.npy", "w") as f:
        npy_format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": shape}
        )
        f.write(np.zeros(4).tobytes())
    return path


def test_npz_header_claiming_1e12_rows_is_refused_before_reading(tmp_path: Path):
    path = _npz_claiming(tmp_path / "huge.npz", (10**12,))
    with pytest.raises(ValueError, match=r"huge\.npz': array 'time': rows: "
                       r"1,000,000,000,000 exceeds the limit max_rows"):  # fmt: skip
        read_columns(path)


def test_npz_header_that_disagrees_with_stored_size_is_refused(tmp_path: Path):
    path = _npz_claiming(tmp_path / "lie.npz", (1000,))
    with pytest.raises(ValueError, match=r"header claims shape \(1000,\) .* but .* bytes are "
                       r"stored; the file is corrupt"):  # fmt: skip
        check_npz_headers(path, repr(str(path)))


def test_npz_with_too_many_rows_is_refused_from_its_header(tmp_path: Path):
    path = tmp_path / "big.npz"
    np.savez_compressed(path, time=np.zeros(5000))  # small on disk
    with limits_set(max_rows=1000), pytest.raises(ValueError, match=r"rows: 5,000 exceeds"):
        read_columns(path)
    assert read_columns(path)["time"].shape == (5000,)


def test_csv_rows_are_counted_before_parsing(tmp_path: Path):
    path = tmp_path / "long.csv"
    path.write_text("time,x\n" + "".join(f"{i},0\n" for i in range(1500)))
    pattern = r"long\.csv': data rows: 1,500 exceeds the limit max_rows=1,000"
    with limits_set(max_rows=1000), pytest.raises(ValueError, match=pattern):
        read_columns(path)
    assert read_columns(path)["time"].shape == (1500,)


# --- experiment sizes ---------------------------------------------------------------------


def test_glitched_last_time_stamp_is_named(box: Path):
    _set_last_time(box, "1e5")
    with pytest.raises(ExperimentError, match=r"sequences\[0\][ :].*push\.csv.*: time stamps must "
                       r"not jump far beyond the others, got .* then 100000\.0 in data rows "
                       r"999 and 1000"):  # fmt: skip
        load_experiment(box / "experiment.yaml")


def test_last_time_stamp_1e300_is_named_not_a_numpy_size_error(box: Path):
    _set_last_time(box, "1e300")
    with pytest.raises(ExperimentError, match=r"push\.csv.*time stamps must not jump"):
        load_experiment(box / "experiment.yaml")


@pytest.mark.parametrize("scale", [100000, 1e300])
def test_time_scale_typo_is_refused_by_step_count(box: Path, scale: float):
    exp = _edit_sequence(box, time_scale=scale)
    with pytest.raises(ExperimentError, match=r"sequences\[0\][ :].*push\.csv.*: simulated steps "
                       r"\(time span .* s after time_scale / timestep 0\.002 s\): .* exceeds "
                       r"the limit max_steps"):  # fmt: skip
        load_experiment(exp)


def test_tiny_shooting_window_is_refused_by_window_count(box: Path):
    exp = _edit(box, shooting={"window": 1e-300})
    with pytest.raises(ExperimentError, match=r"shooting\.window: 1e-300 s with overlap 0\.0 s "
                       r"gives windows: .* exceeds the limit max_windows"):  # fmt: skip
        load_experiment(exp)


def test_limits_key_raises_a_limit(box: Path):
    exp = _edit(box, shooting={"window": 0.004}, limits={"max_windows": 10})
    with pytest.raises(ExperimentError, match=r"gives windows: 500 exceeds .*max_windows=10"):
        load_experiment(exp)


def test_limits_key_is_validated(box: Path):
    exp = _edit(box, limits={"max_widows": 10})
    with pytest.raises(ExperimentError, match=r"limits: unknown limit 'max_widows'"):
        load_experiment(exp)


def test_parameter_count_is_checked(box: Path):
    exp = box / "experiment.yaml"  # friction and the box's initial state
    with (
        limits_set(max_parameters=3),
        pytest.raises(
            ExperimentError, match=r"parameters \(window initial states included\): .* exceeds"
        ),
    ):
        load_experiment(exp)


# --- bounded error messages ---------------------------------------------------------------


def _alias_bomb(levels: int) -> list:
    value: list = ["lol"] * 9
    for _ in range(levels):
        value = [value] * 9
    return value


def test_short_repr_does_not_expand_nested_aliases():
    bomb = _alias_bomb(40)  # repr would be ~9**41 characters
    start = time.process_time()
    text = short_repr(bomb)
    assert time.process_time() - start < 1.0
    assert len(text) <= 80 and text.startswith("[[[[") and text.endswith("...")


def test_short_repr_matches_repr_for_small_values():
    for value in ([1, 2], (1,), {"a": [1, (2, 3)]}, set(), "x", None, 1.5, {1}):
        assert short_repr(value) == repr(value)


def test_yaml_alias_bomb_in_ignore_columns_gets_a_bounded_message(box: Path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 12):
        prev = chr(ord("a") + k - 1)
        name = chr(ord("a") + k)
        lines.append(f"{name}: &{name} [{', '.join('*' + prev for _ in range(9))}]")
    exp = box / "experiment.yaml"
    text = exp.read_text().replace(
        "    file: push.csv", "    file: push.csv\n    ignore_columns: *l"
    )
    exp.write_text("\n".join(f"# {line}" for line in []) + _anchors(lines) + text)
    with pytest.raises(ExperimentError, match=r"ignore_columns\[0\] must be a column name") as e:
        load_experiment(exp)
    assert len(str(e.value)) < 1000


def _anchors(lines: list[str]) -> str:
    """The alias lines as a hidden top-level key (``x-anchors`` is refused later, but the
    sequence error comes first)."""
    body = "".join(f"  {line}\n" for line in lines)
    return f"anchors:\n{body}"


# --- the report ---------------------------------------------------------------------------


def test_a_60_window_fit_report_is_bounded(make_problem, tmp_path: Path):
    """Issue #22: a 60-window fit's report took 84 s and 19.9 MB; windows are now stitched."""
    import mjsysid as ms
    from conftest import ARM2

    def masses(spec, model):
        return ms.ParameterDict(
            [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
        )

    p = make_problem(ARM2, None, n=1200, qpos=[0.3, -0.2], noise=0.01)
    windows = ms.split_windows(p.sequences, 0.04)
    params = masses(p.spec, p.model)
    params.update(ms.initial_state_params(windows))
    assert len(list(windows.sequences())) == 60
    rf = ms.build_residual_fn([windows])
    opt, res = ms.optimize(params, rf, max_iters=1, horizons=None)
    out = ms.default_report(windows, params, opt, res, rf, tmp_path / "r", videos=False)
    html = out.read_text()
    assert len(html) < 2_000_000  # 3.3 MB with every window drawn
    assert "stitched into 1 whole-recording view" in html
    assert html.count('"s0c0"') >= 1 and '"s1c0"' not in html
    with limits_set(max_heatmap_parameters=100):
        html = ms.default_report(windows, params, opt, res, rf, tmp_path / "r2", videos=False)
    text = html.read_text()
    rf.close()
    # the map holds the 2 physical parameters (the 240 initial states are left out of it);
    # the audit of all 242 columns is what the limit leaves out
    assert "No correlation map:" not in text and "240 initial-state parameters are left out" in text
    assert "No identifiability audit: 242 parameters exceed the limit" in text
    assert "max_heatmap_parameters=100" in text
