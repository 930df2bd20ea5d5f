"""Bad results folders and save_results arguments: each fails early with a clear message."""

from __future__ import annotations

import numpy as np

import mjsysid as ms
from bad_inputs_support import (
    _case,
    _result,
    _truncate,
    table_test,
)

CASES = [
    # ---- results folders ---------------------------------------------------------------------
    _case(
        "results-no-summary",
        lambda c: ms.load_results(c.results_copy(lambda f: (f / "result.yaml").unlink())),
        FileNotFoundError,
        r"'.*copy' has no result\.yaml: it is not a results folder, or "
        r"saving was interrupted",
    ),
    _case(
        "results-listed-file-missing",
        lambda c: ms.load_results(c.results_copy(lambda f: (f / "confidence.yaml").unlink())),
        ValueError,
        r"'.*copy' is incomplete: missing \['confidence\.yaml'\]",
    ),
    _case(
        "results-not-a-folder",
        lambda c: ms.load_results(c.tmp / "nothing"),
        FileNotFoundError,
        r"no such results folder: '.*nothing'",
    ),
    _case(
        "results-npz-truncated",
        lambda c: ms.load_results(c.results_copy(lambda f: _truncate(f / "result.npz"))),
        ValueError,
        r"'.*result\.npz' is not a readable \.npz file",
    ),
    _case(
        "results-npz-foreign",
        lambda c: ms.load_results(
            c.results_copy(lambda f: np.savez(f / "result.npz", a=np.ones(2)))
        ),
        ValueError,
        r"'.*result\.npz' must contain arrays \['x', 'fun', 'jac', 'grad'\], missing "
        r"\['x', 'fun', 'jac', 'grad'\]; found \['a'\]",
    ),
    _case(
        "results-confidence-not-a-zip",
        lambda c: ms.load_results(
            c.results_copy(lambda f: (f / "confidence.npz").write_bytes(b"PK\x03\x04 cut short"))
        ),
        ValueError,
        r"'.*confidence\.npz' is not a readable \.npz file",
    ),
    _case(
        "results-newer-schema",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(schema_version=2))),
        ValueError,
        r"result\.yaml: schema_version must be <= 1, got 2; upgrade mjsysid",
    ),
    # a foreign result.yaml: described by its keys or type, never quoted (its first 80
    # characters were)
    _case(
        "results-foreign-summary",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: (f / "result.yaml").write_text("user: alice\npassword: hunter2\n")
            )
        ),
        ValueError,
        r"result\.yaml must be an mjsysid results summary, got a mapping with keys "
        r"\['user', 'password'\], no 'schema: mjsysid\.results'$",
    ),
    _case(
        "results-schema-version-text",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(schema_version="hunter2"))),
        ValueError,
        r"result\.yaml: schema_version must be <= 1, got a str; upgrade mjsysid to read it$",
    ),
    _case(
        "results-python-object-tag",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: (f / "result.yaml").write_text("!!python/object/new:os.system [true]\n")
            )
        ),
        ValueError,
        r"result\.yaml': unsupported YAML tag",
    ),
    _case(
        "results-params-python-object-tag",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: (f / "params_x_hat.yaml").write_text("!!python/name:os.system\n")
            )
        ),
        ValueError,
        r"params_x_hat\.yaml': unsupported YAML tag",
    ),
    _case(
        "results-summary-unknown-key",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(optimiser="mujoco"))),
        ValueError,
        r"result\.yaml: unknown keys \['optimiser'\]",
    ),
    _case(
        "results-summary-wrong-type",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(nit="many"))),
        ValueError,
        r"result\.yaml: nit must be an integer, got 'many'",
    ),
    _case(
        "results-summary-files-not-a-list",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(files="result.npz"))),
        ValueError,
        r"result\.yaml: files must be a list of file names, got 'result\.npz'",
    ),
    _case(
        "results-summary-missing-key",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.pop("parameter_names"))),
        ValueError,
        r"result\.yaml: missing required key 'parameter_names'",
    ),
    _case(
        "results-x-does-not-match-names",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: np.savez(
                    f / "result.npz",
                    x=np.ones(5),
                    fun=np.ones(3),
                    jac=np.ones((3, 5)),
                    grad=np.ones(5),
                )
            )
        ),
        ValueError,
        r"result\.npz: x must be shape \(2,\) \(2 parameter names, 3 residuals\), got .*"
        r"got shape \(5,\); the folder is inconsistent",
    ),
    _case(
        "results-half-widths-do-not-match-names",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: np.savez(
                    f / "confidence.npz",
                    covariance=np.eye(2),
                    half_widths=np.ones(5),
                    alpha=np.array(0.05),
                )
            )
        ),
        ValueError,
        r"confidence\.npz: half_widths must be shape \(2,\) .*got shape \(5,\)",
    ),
    _case(
        "results-params-do-not-match-the-result",
        lambda c: ms.save_results(
            c.tmp / "fit",
            c.seqs,
            c.masses(),
            ms.ParameterDict([ms.body_inertia_param(c.spec, c.model, "link1")]),
            _result(c),
        ),
        ValueError,
        r"opt_params: free parameters must be those of opt_result \['link1_mass', 'link2_mass'\]"
        r", got \['link1_mass'\]",
    ),
    _case(
        "results-no-sequences",
        lambda c: ms.save_results(c.tmp / "fit", [], c.masses(), c.masses(), _result(c)),
        TypeError,
        r"models_sequences must be a ModelSequences or a non-empty list of them, got \[\]",
    ),
    _case(
        "results-params-not-a-parameter-dict",
        lambda c: ms.save_results(c.tmp / "fit", c.seqs, {"a": 1}, c.masses(), _result(c)),
        TypeError,
        r"initial_params must be a ParameterDict, got 'dict'",
    ),
    _case(
        "results-folder-not-writable",
        lambda c: ms.save_results(c.blocker() / "fit", c.seqs, c.masses(), c.masses(), _result(c)),
        OSError,
        r"cannot create folder '.*not_a_folder/fit'",
    ),
    _case(
        "results-folder-is-a-file",
        lambda c: ms.save_results(c.blocker(), c.seqs, c.masses(), c.masses(), _result(c)),
        OSError,
        r"cannot create folder '.*not_a_folder'",
    ),
    _case(
        "results-not-an-optimize-result",
        lambda c: ms.save_results(c.tmp / "fit", c.seqs, c.masses(), c.masses(), {"x": [1.0]}),
        TypeError,
        r"opt_result must be an OptimizeResult, got 'dict'",
    ),
]


test_bad_input = table_test(CASES)
