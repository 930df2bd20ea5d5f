"""The names of the files in a results folder, in one place.

A results folder (:func:`mjsysid.save_results`, ``mjsysid fit --out``) holds these files;
every module that writes or reads one names it by its constant here.
"""

from __future__ import annotations

PARAMS_X0 = "params_x_0.yaml"
"""The initial parameters (schema, bounds, values, metadata)."""
PARAMS_X_HAT = "params_x_hat.yaml"
"""The identified parameters."""
RESULT_NPZ = "result.npz"
"""``x``, residual, Jacobian, gradient, per-iteration objective and candidates."""
RESULT_YAML = "result.yaml"
"""The summary (status, message, costs, versions) and the file list; written last."""
CONFIDENCE_NPZ = "confidence.npz"
"""Covariance, confidence half-widths (and ends), method and caveats."""
CONFIDENCE_YAML = "confidence.yaml"
"""The same per parameter, human readable."""
ROBOT_YAML = "robot.yaml"
IDENTIFIED_YAML = "identified.yaml"
"""The joint and actuator values in a plain robot configuration (one model)."""
ASSETS_DIR = "assets"
"""The copies of the asset files (meshes, textures, height fields) the models name."""
REPORT_HTML = "report.html"
"""The HTML report."""
REPORT_ASSETS = "report_assets"
"""The report's folder of scripts and videos."""
