"""Nothing is written outside the results folder: no ``MUJOCO_LOG.TXT`` in the working
directory from any command, no flood of MuJoCo warnings on stdout, no link followed when the
log is kept, no shader cache in the user's home folder."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid
from mjsysid.app.cli import main
from mjsysid.app.commands.common import results_folder
from mjsysid.util.mujoco_log import MUJOCO_LOG, mujoco_log_in

EXAMPLES = Path(mjsysid.__file__).parent / "examples"


@pytest.fixture
def unstable(tmp_path: Path) -> Path:
    """The cart-pole example whose motor has a gear of 1e40: every simulation is unstable."""
    folder = tmp_path / "unstable"
    shutil.copytree(EXAMPLES / "cartpole", folder)
    xml = folder / "cartpole.xml"
    xml.write_text(xml.read_text().replace('gear="1"', 'gear="1e40"'))
    return folder


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _unstable_warning() -> None:
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><joint/><geom size='1'/></body></worldbody></mujoco>"
    )
    data = mujoco.MjData(model)
    data.qvel[0] = np.nan
    mujoco.mj_step(model, data)


def _run(argv: list[str], capfd) -> tuple[int, str, str]:
    """Runs the CLI; stdout and stderr at the file-descriptor level (MuJoCo prints from C)."""
    code = main(argv)
    out, err = capfd.readouterr()
    return code, out, err


def _argv_check(u: Path, t: Path) -> list[str]:
    return ["check", str(u / "experiment.yaml"), "--shift-iters", "1"]


def _argv_evaluate(u: Path, t: Path) -> list[str]:
    return ["evaluate", "example:cartpole", str(u / "cartpole.xml"), "--starts", "2", "-q"]


def _argv_simulate(u: Path, t: Path) -> list[str]:
    return ["simulate", str(u / "cartpole.xml"), "--out", str(t / "s.csv"), "--duration", "0.5"]


def _argv_design(u: Path, t: Path) -> list[str]:
    budget = ["--generations", "1", "--popsize", "4"]
    return [
        "design",
        str(u / "experiment.yaml"),
        "--duration",
        "0.5",
        *budget,
        "-o",
        str(t / "d.npz"),
    ]


def _argv_fit(u: Path, t: Path) -> list[str]:
    return ["fit", str(u / "experiment.yaml"), "--out", str(t / "res"), "--no-report", "-q"]


COMMANDS_WITH_AN_UNSTABLE_MODEL = [
    ("check", _argv_check),
    ("evaluate", _argv_evaluate),
    ("simulate", _argv_simulate),
    ("design", _argv_design),
    ("fit", _argv_fit),
]


@pytest.mark.parametrize(("name", "argv"), COMMANDS_WITH_AN_UNSTABLE_MODEL)
def test_no_mujoco_log_in_the_working_directory(tmp_path, cwd, unstable, capfd, caplog, name, argv):
    """Each of these wrote MUJOCO_LOG.TXT into the working directory and printed one
    'WARNING: Nan, Inf or huge value' line per simulation on stdout."""
    _code, out, err = _run(argv(unstable, tmp_path), capfd)
    assert list(cwd.iterdir()) == []
    assert "WARNING: Nan, Inf or huge value" not in out + err  # no flood from MuJoCo ...
    said = [r.message for r in caplog.records if r.message.startswith("MuJoCo logged")]
    assert said and "The simulation is unstable" in said[-1]  # ... one line says it instead
    if name == "fit":
        log = (tmp_path / "res" / MUJOCO_LOG).read_text()
        assert log.count("The simulation is unstable") >= 1  # kept with the results


def test_the_summary_names_the_count_and_the_first_message(tmp_path, caplog):
    with mujoco_log_in(tmp_path / "res") as log:
        _unstable_warning()
    assert log.messages == 1
    assert log.first.startswith("Nan, Inf or huge value in QVEL at DOF 0")
    assert log.path == tmp_path / "res" / MUJOCO_LOG
    assert any("MuJoCo logged 1 message(s)" in r.message for r in caplog.records)
    with mujoco_log_in(None) as log:
        pass
    assert log.messages == 0 and log.path is None


def test_nested_logs_keep_their_own_messages(tmp_path, cwd):
    before = mujoco.MjLogConfig.get()
    with mujoco_log_in(None) as outer:
        with mujoco_log_in(tmp_path / "res") as inner:
            _unstable_warning()
        _unstable_warning()
    after = mujoco.MjLogConfig.get()
    assert (after.logfile, after.logto_console) == (before.logfile, before.logto_console)
    assert inner.messages == 1 and outer.messages == 1
    assert list(cwd.iterdir()) == []
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("mjsysid-mujoco-log-*/*"))


def test_a_symlinked_log_is_replaced_not_followed(tmp_path, cwd):
    """``out/mujoco_log.txt`` -> a file elsewhere: the file elsewhere is never written."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "res"
    out.mkdir()
    (out / MUJOCO_LOG).symlink_to(victim)
    with results_folder(out, io.StringIO()):
        _unstable_warning()
    assert victim.read_text() == "precious\n"
    assert not (out / MUJOCO_LOG).is_symlink()
    assert "The simulation is unstable" in (out / MUJOCO_LOG).read_text()


def test_a_dangling_symlink_and_a_hard_link_are_replaced(tmp_path, cwd):
    out = tmp_path / "res"
    out.mkdir()
    target = tmp_path / "would-be-created.txt"
    (out / MUJOCO_LOG).symlink_to(target)
    with mujoco_log_in(out):
        _unstable_warning()
    assert not target.exists() and not (out / MUJOCO_LOG).is_symlink()
    other = tmp_path / "other.txt"
    other.write_text("mine\n")
    (out / MUJOCO_LOG).unlink()
    os.link(other, out / MUJOCO_LOG)
    with mujoco_log_in(out):
        _unstable_warning()
    assert other.read_text() == "mine\n"
    assert os.stat(out / MUJOCO_LOG).st_nlink == 1


def test_a_fifo_in_place_of_the_log_is_refused(tmp_path):
    out = tmp_path / "res"
    out.mkdir()
    os.mkfifo(out / MUJOCO_LOG)
    with pytest.raises(OSError, match=r"cannot write .*mujoco_log.txt"), mujoco_log_in(out):
        _unstable_warning()


RENDER = textwrap.dedent(
    """
    import mujoco, numpy as np
    from mjsysid.output.plotting import OffscreenRenderingError, render_rollout
    m = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><light pos='0 0 2'/><body><joint/><geom size='.1'/></body>"
        "</worldbody></mujoco>")
    n = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS.value)
    try:
        frames = render_rollout(m, mujoco.MjData(m), np.zeros((5, n)), width=64, height=48)
    except OffscreenRenderingError:
        raise SystemExit(3)
    assert frames[0].shape == (48, 64, 3)
    import os
    assert "MESA_SHADER_CACHE_DISABLE" not in os.environ  # the environment is as it was
    """
)


def test_rendering_writes_no_shader_cache_into_the_home_folder(tmp_path):
    """Mesa's shader cache went to ~/.cache/mesa_shader_cache (the home folder of the password
    database, or $XDG_CACHE_HOME) on every report; both point at empty folders here."""
    home, cache = tmp_path / "home", tmp_path / "xdg-cache"
    home.mkdir()
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(cache))
    done = subprocess.run(
        [sys.executable, "-c", RENDER], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode == 3:
        pytest.skip("no offscreen OpenGL here")
    assert done.returncode == 0, done.stderr
    assert list(home.rglob("*")) == [] and list(cache.rglob("*")) == []


def test_a_cache_the_user_chose_is_left_alone(tmp_path):
    chosen = tmp_path / "my-cache"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MESA_")}
    env.update(MESA_SHADER_CACHE_DIR=str(chosen), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    code = RENDER.replace(
        'assert "MESA_SHADER_CACHE_DISABLE" not in os.environ',
        'assert os.environ["MESA_SHADER_CACHE_DIR"]',
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode == 3:
        pytest.skip("no offscreen OpenGL here")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "xdg").exists()
