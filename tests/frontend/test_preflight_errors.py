"""Each preflight error: a one-line library exception, and `dcoc tasks` exit 2 with exactly
one stderr line and no traceback."""
from __future__ import annotations

import pytest
from frontend_util import run_cli

from dcoc.cli import main
from dcoc.errors import DcocError, ModelError, TargetError

# (bad_models key or literal argument, extra CLI args, exception type, message fragments)
CASES = {
    "missing": ("/nonexistent/dir/model.onnx", [], ModelError,
                ["model file '/nonexistent/dir/model.onnx' does not exist"]),
    "unknown_name": ("resnet1000", [], ModelError,
                     ["unknown model 'resnet1000'; not a file and not in the zoo (resnet18"]),
    "garbage": ("garbage", [], ModelError, ["is not an ONNX model", "protobuf parse failed"]),
    "text": ("text", [], ModelError, ["is not an ONNX model"]),
    "empty": ("empty", [], ModelError, ["is an empty file, not an ONNX model"]),
    "checker": ("checker", [], ModelError,
                ["fails the ONNX checker", "undefined_tensor", "topologically sorted"]),
    "unsupported": ("unsupported", [], ModelError,
                    ["uses 4 operator type(s) (5 node(s)) the TVM Relax ONNX frontend does not "
                     "support: Celu x2, Det x1, LpNormalization x1, com.example::FancyOp x1"]),
    "dynamic": ("dynamic", [], ModelError,
                ["input 'x'", "dynamic dimensions 'batch' (dim 0), 'h' (dim 2), 'w' (dim 3)",
                 "--input-shape x:<batch>,3,<h>,<w>"]),
    "wrong_input_name": ("dynamic", ["--input-shape", "y:1,3,8,8"], ModelError,
                         ["--input-shape names 'y', but the inputs of", "are: x"]),
    "wrong_rank": ("dynamic", ["--input-shape", "x:1,3,8"], ModelError,
                   ["has rank 4, but --input-shape gives 3 dims (1,3,8)"]),
    "bad_shape_syntax": ("dynamic", ["--input-shape", "x=1,3"], ModelError,
                         ["--input-shape 'x=1,3': expected NAME:D0,D1,..."]),
    "missing_external_data": ("missing_data", [], ModelError,
                              ["references missing external data file(s): extdata.onnx.data"]),
    "tvm_failure": ("tvm_failure", [], ModelError,
                    ["TVM's ONNX importer failed on operator 'Reshape' (node 'bad_reshape')",
                     "old shape is R.shape([2, 3])"]),
    "unknown_target": ("light_squeezenet", ["--target", "foo"], TargetError,
                       ["unknown target 'foo'; expected vta, llvm, cuda or a TVM target JSON "
                        "dict"]),
    "cli_string_target": ("light_squeezenet", ["--target", "llvm -mcpu=skylake"], TargetError,
                          ["no longer accepts target strings like 'llvm -mcpu=skylake'"]),
    "bad_target_dict": ("light_squeezenet", ["--target", '{"kind": "nope"}'], TargetError,
                        ["invalid TVM target", "nope"]),
}


def _resolve(bad_models, model):
    return bad_models.get(model, model)


def _library_call(path, extra):
    """What the CLI does, through the library API."""
    from dcoc.cli.options import parse_input_shapes
    from tvm_plugin.frontend import model_tasks

    shapes, target = None, "vta"
    if "--input-shape" in extra:
        shapes = parse_input_shapes([extra[extra.index("--input-shape") + 1]])
    if "--target" in extra:
        target = extra[extra.index("--target") + 1]
    return model_tasks(path, target, input_shapes=shapes)


@pytest.mark.parametrize("case", list(CASES))
def test_library_raises_one_line(bad_models, case):
    model, extra, exc_type, fragments = CASES[case]
    with pytest.raises(exc_type) as info:
        _library_call(_resolve(bad_models, model), extra)
    msg = str(info.value)
    assert "\n" not in msg and msg
    for frag in fragments:
        assert frag in msg, msg


@pytest.mark.parametrize("case", list(CASES))
def test_cli_exit_2_one_line(bad_models, case, capfd):
    model, extra, _, fragments = CASES[case]
    rc = main(["tasks", _resolve(bad_models, model), *extra])
    out, err = capfd.readouterr()
    assert rc == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dcoc: error: ")
    assert "Traceback" not in err
    for frag in fragments:
        assert frag in lines[0]


def test_dynamic_dims_succeed_with_input_shape(bad_models, capfd):
    from tvm_plugin.frontend import model_tasks

    tl = model_tasks(bad_models["dynamic"], "vta", input_shapes={"x": (2, 3, 32, 48)})
    (conv,) = list(tl)
    assert conv.workload["batch"] == 2 and conv.workload["height"] == 32 and \
        conv.workload["width"] == 48 and conv.device == "cpu"  # the network's first conv
    rc = main(["tasks", bad_models["dynamic"], "--input-shape", "x:1x3x16x16", "--target",
               "llvm"])
    out, err = capfd.readouterr()
    assert rc == 0 and "conv2d_16x16_3x8_k3s1" in out and err == ""


def test_unsupported_ops_listed_before_lowering(bad_models):
    """The listing comes from preflight (whole graph incl. If branches), not from TVM."""
    import onnx

    from tvm_plugin.frontend import unsupported_ops

    bad = unsupported_ops(onnx.load(bad_models["unsupported"]))
    assert bad == {"Celu": 2, "Det": 1, "LpNormalization": 1, "com.example::FancyOp": 1}


def test_model_proto_input_and_errors(bad_models):
    import onnx

    from tvm_plugin.frontend import load, load_model

    with pytest.raises(ModelError, match="fails the ONNX checker"):
        load_model(onnx.load(bad_models["checker"]))
    with pytest.raises(ModelError, match="expected an ONNX file path or onnx.ModelProto"):
        load(12345)
    m = load(onnx.load(bad_models["dynamic"]), {"x": [1, 3, 8, 8]})
    assert m.input_shapes == {"x": (1, 3, 8, 8)}
    with pytest.raises(ModelError, match="must be a positive integer"):
        load(onnx.load(bad_models["dynamic"]), {"x": [1, 3, 0, 8]})


def test_errors_are_dcoc_errors():
    assert issubclass(ModelError, DcocError) and issubclass(TargetError, DcocError)


@pytest.mark.parametrize("case", ["garbage", "unsupported", "tvm_failure", "unknown_target"])
def test_real_process_prints_one_line(bad_models, case):
    """The same through a fresh `python -m dcoc.cli` process."""
    model, extra, _, fragments = CASES[case]
    r = run_cli("tasks", _resolve(bad_models, model), *extra)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "Traceback" not in r.stderr
    assert fragments[0] in r.stderr
