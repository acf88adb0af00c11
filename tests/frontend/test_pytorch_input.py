"""``dcoc.tune(module, example_inputs=...)``: a PyTorch nn.Module as the model."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import dcoc
from dcoc.errors import DcocError


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.c2 = torch.nn.Conv2d(32, 32, 3, padding=1, stride=2)

    def forward(self, image):
        return torch.relu(self.c2(torch.relu(self.c1(image))))


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return TinyNet().eval()


def test_a_module_is_tuned_run_and_resumed(net, tmp_path):
    x = torch.randn(1, 16, 16, 16)
    wd = str(tmp_path / "wd")
    res = dcoc.tune(net, example_inputs=x, target="vta", trials=16, seed=0, work_dir=wd, n_workers=0)
    assert res.model == "TinyNet" and res.model_path == os.path.join(os.path.abspath(wd), "TinyNet.onnx")
    assert os.path.isfile(res.model_path)
    assert [r["layer"] for r in res.layers] == ["conv2d_16x16_32x32_k3s2"]  # the first conv stays on the CPU
    with pytest.warns(Warning, match="calibrat"):
        out = res.run({"image": x.numpy()})[0]  # forward's parameter name is the input name
    ref = net(x).detach().numpy()
    cos = float((out * ref).sum() / np.linalg.norm(out) / np.linalg.norm(ref))
    assert out.shape == ref.shape and cos > 0.98  # int8 on the simulator vs float torch

    again = dcoc.tune(net, example_inputs=x, target="vta", trials=16, seed=0, work_dir=wd, n_workers=0)
    assert again.latency_ms == res.latency_ms and again.extra["replayed_trials"] == 16

    changed = TinyNet().eval()  # other weights: the work dir belongs to the first model
    with pytest.raises(DcocError, match="another version of TinyNet"):
        dcoc.tune(changed, example_inputs=x, target="vta", trials=16, work_dir=wd, n_workers=0)


def test_module_arguments_are_checked(net, tmp_path):
    with pytest.raises(DcocError, match="example_inputs"):
        dcoc.tune(net, target="vta", trials=4, work_dir=str(tmp_path / "a"))
    with pytest.raises(DcocError, match="example_inputs"):
        dcoc.tune("resnet18", example_inputs=torch.zeros(1), target="vta", trials=4,
                  work_dir=str(tmp_path / "b"))
    with pytest.raises(DcocError, match="tensor"):
        dcoc.tune(net, example_inputs=[1, 2], target="vta", trials=4, work_dir=str(tmp_path / "c"))
