"""``default_report`` called the ``mujoco.sysid`` way as well as mjsysid's.

mjsysid: ``default_report(models_sequences, initial_params, opt_params, opt_result,
residual_fn, save_dir, *, title=None, videos="auto", ...)``.
The peer: ``default_report(models_sequences, initial_params, opt_params, residual_fn,
opt_result, title="SysID", save_path=None, build_model=..., generate_videos=True)``.

The two orders are told apart by the 4th argument: a callable (the residual function) means
the peer's order. ``save_path`` names the report folder (``save_dir``), ``generate_videos`` is
``videos``; ``build_model`` is accepted and unused (the residual function already builds the
models). The peer returns a ``ReportBuilder``; mjsysid writes the files and returns the path
of ``report.html`` (left out: no builder object).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mjsysid.output.report.build import default_report as _default_report

_PEER_POSITIONAL = ("title", "save_path", "build_model", "generate_videos")


def _peer_keywords(rest: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The peer's positional tail (title, save_path, build_model, generate_videos) and its
    keywords as mjsysid keywords."""
    if len(rest) > len(_PEER_POSITIONAL):
        raise TypeError(
            f"default_report() takes at most 9 positional arguments, got {5 + len(rest)}"
        )
    peer = dict(zip(_PEER_POSITIONAL, rest, strict=False))
    for k in _PEER_POSITIONAL:
        if k in kwargs:
            if k in peer:
                raise TypeError(f"default_report() got multiple values for {k!r}")
            peer[k] = kwargs.pop(k)
    peer.pop("build_model", None)
    if "save_path" in peer:
        kwargs.setdefault("save_dir", peer.pop("save_path"))
    if "generate_videos" in peer:
        kwargs.setdefault("videos", bool(peer.pop("generate_videos")))
    if "title" in peer:
        kwargs.setdefault("title", peer.pop("title"))
    return kwargs


def default_report(
    models_sequences: Any,
    initial_params: Any,
    opt_params: Any,
    opt_result: Any = None,
    residual_fn: Any = None,
    *rest: Any,
    **kwargs: Any,
) -> Path:
    """:func:`mjsysid.output.report.build.default_report`, also in ``mujoco.sysid``'s
    argument order (module docstring).

    Raises:
      TypeError: No folder to write to (``save_dir``, or the peer's ``save_path``).
    """
    if callable(opt_result) and not callable(residual_fn):  # the peer's order
        opt_result, residual_fn = residual_fn, opt_result
        kwargs = _peer_keywords(rest, kwargs)
    else:
        if len(rest) > 1:
            raise TypeError("default_report() takes 6 positional arguments (save_dir last)")
        if rest:
            kwargs["save_dir"] = rest[0]
        kwargs = _peer_keywords((), kwargs)
    if kwargs.get("save_dir") is None:
        raise TypeError(
            "default_report() needs save_dir (mujoco.sysid: save_path): the folder to write "
            "report.html into"
        )
    save_dir = kwargs.pop("save_dir")
    return _default_report(
        models_sequences, initial_params, opt_params, opt_result, residual_fn, save_dir, **kwargs
    )
