"""A fit's messages speak their reader's language (experiment file or Python) and name only
the causes and remedies that can apply (issue #19)."""

from __future__ import annotations

import mujoco
import pytest

from mjsysid.fit.status import (
    REMEDIES,
    MessageContext,
    Status,
    fit_context,
    message,
    model_context,
    reworded,
)

PYTHON_WORDS = ("split_windows", "optimize(", "global_search=", "horizons=", "eps=", "max_iters or")
FILE_WORDS = ("shooting: {window:", "optimizer: {", "--horizons", "time_range:")

FREE_BOX = """
<mujoco><worldbody>
  <geom type="plane" size="1 1 0.1"/>
  <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
</worldbody></mujoco>"""

PENDULUM = """
<mujoco><worldbody>
  <body><joint type="hinge" axis="0 1 0" frictionloss="0.1"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/>
    <body pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"/></body>
  </body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("status", list(REMEDIES))
def test_each_language_names_its_own_remedies(status):
    file = message(status, 50, MessageContext("file"))
    python = message(status, 50, MessageContext("python"))
    both = message(status, 50)
    assert not any(w in file for w in PYTHON_WORDS), file
    assert not any(w in python for w in FILE_WORDS), python
    assert "experiment file:" in both and "Python:" in both


def test_the_file_words_are_experiment_keys_and_flags():
    text = message(Status.SMALL_STEP, 50, MessageContext("file"))
    assert "shooting: {window: 1.0, estimate_initial_state: true}" in text
    assert "optimizer: {horizons: auto}, or --horizons 0.25 1" in text
    assert "optimizer: {global: cmaes} or optimizer: {starts: 8}" in text
    assert message(Status.MAX_ITERS, 7, MessageContext("file")) == (
        "Stopped after max_iters=7 iterations before converging; raise optimizer: "
        "{max_iters: N} (or --max-iters N)."
    )
    assert "optimizer: {eps: 1e-6}" in message(Status.NO_IMPROVEMENT, 5, MessageContext("file"))


def test_only_causes_that_can_apply_are_named():
    smooth = MessageContext("file", contacts=False, dry_friction=False)
    text = message(Status.STALLED, 50, smooth)
    assert "contact" not in text and "friction" not in text and "time_range" not in text
    assert "non-smooth" not in text and "drifts from the data" in text
    friction = message(Status.STALLED, 50, MessageContext("file", contacts=False))
    assert "a non-smooth cost (dry friction)" in friction and "contact" not in friction
    windowed = MessageContext("file", contacts=False, dry_friction=False, windowed=True)
    text = message(Status.SMALL_STEP, 50, windowed)
    assert "shooting" not in text and "drifts" not in text and "horizons" in text
    done = MessageContext("file", False, False, windowed=True, staged=True, searched=True)
    text = message(Status.SMALL_STEP, 50, done)
    assert text.endswith("Likely causes: a poor start.")
    assert "Remedies" not in text
    text = message(Status.NO_IMPROVEMENT, 5, MessageContext("python", False, False))
    assert "contacts" not in text and "Here it can come from" not in text


def test_the_context_of_a_model_and_a_fit():
    box = mujoco.MjModel.from_xml_string(FREE_BOX)
    pendulum = mujoco.MjModel.from_xml_string(PENDULUM)
    assert model_context([box]).contacts is True
    ctx = model_context([pendulum], language="python")
    assert ctx.contacts is False and ctx.dry_friction is True  # parent-child: filtered
    ctx = fit_context([pendulum], ["run#0", "run#1"], "file", staged=True, searched=True)
    assert ctx.windowed and ctx.staged and ctx.searched and ctx.language == "file"
    assert not fit_context([pendulum], ["run"], "file").windowed
    with pytest.raises(ValueError, match="language must be one of"):
        MessageContext("yaml")


def test_a_result_message_is_reworded_with_its_limit():
    generic = message(Status.MAX_ITERS, 12)
    ctx = MessageContext("file")
    assert reworded(generic, "max_iters", ctx) == message(Status.MAX_ITERS, 12, ctx)
    assert reworded("custom words", "not-a-status", ctx) == "custom words"
    assert reworded("Converged: the parameter step fell below xtol.", "xtol", ctx) == (
        message(Status.XTOL, 0)
    )
