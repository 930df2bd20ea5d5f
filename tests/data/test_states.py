"""Initial states: create_initial_state."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2


def test_create_initial_state_full_and_named():
    model = mujoco.MjModel.from_xml_string(ARM2)
    x = ms.create_initial_state(model, qpos=[0.1, 0.2], qvel=[0.3, 0.4], time=1.5)
    assert x.shape == (mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS),)
    np.testing.assert_allclose(x[:5], [1.5, 0.1, 0.2, 0.3, 0.4])
    y = ms.create_initial_state(model, qpos={"j2": 0.7})
    np.testing.assert_allclose(y[1:3], [0.0, 0.7])
    with pytest.raises(
        KeyError, match=r"qpos: the model has no joint named 'j3'; known: \['j1', 'j2'\]"
    ):
        ms.create_initial_state(model, qpos={"j3": 0.1})
    with pytest.raises(ValueError, match=r"qpos must be an array of length 2"):
        ms.create_initial_state(model, qpos=[0.1])
    with pytest.raises(ValueError, match=r"qvel must be finite, got qvel\[1\]=nan"):
        ms.create_initial_state(model, qvel=[0.0, np.nan])
    with pytest.raises(TypeError, match="did you pass an MjSpec"):
        ms.create_initial_state(mujoco.MjSpec.from_string(ARM2))
