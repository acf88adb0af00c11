"""Model-level timing (simulate_model) and the ``dcoc simulate`` command."""
import json
import math
import sys
import types

import pytest

from dcoc import cli
from dcoc.targets.vta import HWConfig, default_knobs, simulate, simulate_model
from dcoc.targets.vta.report import MODEL_EPILOGUE
from dcoc.targets.vta.workloads import Conv2DWorkload
from dcoc.tasks import Task, TaskList

PYNQ = HWConfig.preset("pynq")

#: vta-reference §4.2 ResNet-18 table: (H, CI, CO, K, S, count in the net)
RESNET18 = [(56, 64, 64, 3, 1, 4), (56, 64, 128, 3, 2, 1), (56, 64, 128, 1, 2, 1),
            (28, 128, 128, 3, 1, 3), (28, 128, 256, 3, 2, 1), (28, 128, 256, 1, 2, 1),
            (14, 256, 256, 3, 1, 3), (14, 256, 512, 3, 2, 1), (14, 256, 512, 1, 2, 1),
            (7, 512, 512, 3, 1, 3)]


def _conv(h, ci, co, k, s, count, device="vta", groups=1):
    p = k // 2
    o = (h + 2 * p - k) // s + 1
    wl = dict(batch=1, in_channels=ci, out_channels=co, height=h, width=h, kernel_h=k,
              kernel_w=k, stride_h=s, stride_w=s, pad_top=p, pad_left=p, pad_bottom=p,
              pad_right=p, dilation_h=1, dilation_w=1, groups=groups, out_height=o, out_width=o)
    kind = "conv2d" if groups == 1 else "depthwise_conv2d"
    return Task(name=f"conv2d_{h}x{h}_{ci}x{co}_k{k}s{s}", kind=kind, workload=wl, weight=count,
                macs=co * o * o * ci // groups * k * k, device=device)


def resnet18_tasks():
    tasks = [_conv(224, 3, 64, 7, 2, 1, device="cpu")] + [_conv(*r) for r in RESNET18]
    tasks.append(Task("dense_m1_n1000_k512", "dense", dict(batch=1, m=1, n=1000, k=512),
                      weight=1, macs=512000, device="cpu"))
    cpu_ops = [Task("max_pool2d", "other", {"elements": 1}, weight=1, device="cpu"),
               Task("mean", "other", {"elements": 1}, weight=1, device="cpu")]
    return TaskList(tasks, cpu_ops, model="resnet18", target="vta")


def test_simulate_model_resnet18():
    tasks = resnet18_tasks()
    rep = simulate_model(tasks, PYNQ)
    assert len(rep.layers) == 10 and rep.valid
    assert sum(ly.weight for ly in rep.layers) == 19            # 16 3x3 + 3 1x1 convs on VTA
    total = sum(ly.weight * ly.seconds for ly in rep.layers)
    assert rep.total_seconds == pytest.approx(total)
    assert rep.total_cycles == sum(ly.weight * ly.cycles for ly in rep.layers)
    # every layer = simulate() with the default schedule and the model epilogue
    ly = rep.layers[0]
    wl = Conv2DWorkload.from_task(tasks[1])
    assert ly.default and ly.knobs == default_knobs(wl, PYNQ, epilogue=MODEL_EPILOGUE)
    assert ly.cycles == simulate(wl, PYNQ, ly.knobs, epilogue=MODEL_EPILOGUE).cycles
    cpu = {c.name: c.count for c in rep.cpu_layers}
    assert cpu == {"conv2d_224x224_3x64_k7s2": 1, "dense_m1_n1000_k512": 1, "max_pool2d": 1,
                   "mean": 1}
    assert rep.cpu_count == 4
    assert 0.03 < rep.total_seconds < 0.2 and 0 < rep.gops < PYNQ.peak_gops
    text = rep.table()
    assert "conv2d_56x56_64x64_k3s1" in text and "accelerator total" in text
    assert "CPU layers" in text and "max_pool2d" in text
    d = rep.as_dict()
    assert d["hw"] == PYNQ.name and len(d["layers"]) == 10 and len(d["cpu_layers"]) == 4


def test_simulate_model_knobs_and_invalid_layers():
    tasks = resnet18_tasks()
    name = tasks[1].name
    good = dict(tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)
    rep = simulate_model(tasks, PYNQ, {name: good})
    assert rep.layers[0].knobs == good and not rep.layers[0].default
    rep = simulate_model(tasks, PYNQ, {name: dict(good, tile_h=56)})
    assert not rep.valid and not rep.layers[0].valid
    assert "overflow" in rep.layers[0].reason
    assert math.isinf(rep.total_seconds) and "invalid" in rep.table()
    assert rep.as_dict()["total_seconds"] is None


def test_simulate_model_kinds():
    tasks = [Task("bm", "batch_matmul", dict(batch=4, m=32, n=64, k=64), weight=2, device="vta"),
             Task("dw", "depthwise_conv2d", {}, weight=3, device="cpu"),
             Task("weird", "other", {}, weight=1, device="vta")]
    rep = simulate_model(tasks, PYNQ, cpu_ops=[])
    assert len(rep.layers) == 1 and rep.layers[0].weight == 8 and rep.layers[0].repeats == 4
    assert {c.name for c in rep.cpu_layers} == {"dw", "weird"}
    # a layer no schedule can fit: reported invalid, no exception
    tiny = HWConfig(log_inp_buff=8, log_wgt_buff=12, log_acc_buff=10, log_uop_buff=8)
    rep = simulate_model([_conv(56, 64, 64, 5, 1, 1)], tiny)  # 5x5 window > 16-entry INP
    assert not rep.valid and "fits" in rep.layers[0].reason


# ----------------------------------------------------------------------------- CLI
@pytest.fixture
def fake_frontend(monkeypatch):
    calls = {}

    def model_tasks(model, target="vta", input_shapes=None):
        calls.update(model=model, target=target, input_shapes=input_shapes)
        return resnet18_tasks()

    import tvm_plugin.rpc  # noqa: F401 - the real package first: building the CLI parser imports it

    mod = types.ModuleType("tvm_plugin.frontend")
    mod.model_tasks = model_tasks
    monkeypatch.setitem(sys.modules, "tvm_plugin.frontend", mod)
    return calls


def test_cli_simulate_prints_table(fake_frontend, capsys):
    rc = cli.main(["simulate", "resnet18", "--board", "pynq", "--input-shape", "data:1,3,224,224"])
    out = capsys.readouterr().out
    assert rc == 0
    assert fake_frontend == {"model": "resnet18", "target": "vta",
                             "input_shapes": {"data": (1, 3, 224, 224)}}
    assert "1x16x16_i8w8a32_15_15_18_17" in out and "accelerator total" in out
    assert "conv2d_7x7_512x512_k3s1" in out and "CPU layers" in out


def test_cli_simulate_hw_json_and_knobs(fake_frontend, capsys, tmp_path):
    kf = tmp_path / "k.json"
    kf.write_text(json.dumps({"conv2d_56x56_64x64_k3s1": dict(
        tile_h=8, tile_w=56, tile_ci=1, tile_co=2, oc_nthread=2, h_nthread=1)}))
    rc = cli.main(["simulate", "resnet18", "--hardware", "pynq_4x8", "--json", "--knobs", str(kf)])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["hw"] == "4x8x8_i8w8a32_15_16_16_18" and d["board"] == "pynq"
    assert d["layers"][0]["default"] is False
    rc = cli.main(["simulate", "resnet18", "--board", "ultra96"])
    assert rc == 0 and "333 MHz" in capsys.readouterr().out


@pytest.mark.parametrize("argv, msg", [
    (["--board", "arty"], "unknown board"),
    (["--hardware", "nonsense"], "cannot parse HW config"),
    (["--hardware", "1x32x32_i8w8a32_15_15_18_17"], "does not fit pynq"),
    (["--knobs", "/nonexistent.json"], "--knobs file /nonexistent.json does not exist"),
])
def test_cli_simulate_errors(fake_frontend, capsys, argv, msg):
    rc = cli.main(["simulate", "resnet18"] + argv)
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and err.count("\n") == 1


def test_cli_simulate_bad_knobs_files(fake_frontend, capsys, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert cli.main(["simulate", "resnet18", "--knobs", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    bad.write_text("[1, 2]")
    assert cli.main(["simulate", "resnet18", "--knobs", str(bad)]) == 2
    assert "must map layer names" in capsys.readouterr().err
    bad.write_text(json.dumps({"nope": {"tile_h": 1}}))
    assert cli.main(["simulate", "resnet18", "--knobs", str(bad)]) == 2
    assert "unknown task" in capsys.readouterr().err
    bad.write_text(json.dumps({"conv2d_56x56_64x64_k3s1": {"tile_h": 5}}))
    assert cli.main(["simulate", "resnet18", "--knobs", str(bad)]) == 1  # invalid layer reported
    assert "invalid" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_simulate_real_resnet18(capsys):
    """End to end through the real TVM frontend (imports TVM; slow)."""
    rc = cli.main(["simulate", "resnet18", "--board", "pynq"])
    out = capsys.readouterr().out
    assert rc == 0 and "conv2d_56x56_64x64_k3s1" in out and "CPU layers" in out
