"""`skillbase tasks show FILE --json` and `skillbase recall FILE` on a plain PyTorch file without META:
the traced families, ops, bytes, FLOPs, regime and fusion, and recall that reaches lessons of its kind."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from skillbase.console import app
from skillbase.models import RecallResult, TaskSummary

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Gemm, then a group norm and a swish."""

    def __init__(self, in_features, out_features, groups):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)

    def forward(self, x):
        y = self.norm(self.fc(x))
        return y * torch.sigmoid(y)


batch_size, in_features, out_features, groups = 1024, 512, 1024, 16


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, groups]
'''


def test_tasks_show_json_carries_what_the_forward_runs(module_home, tmp_path):
    path = tmp_path / "12_gemm_groupnorm_swish.py"
    path.write_text(TASK)
    result = CliRunner().invoke(app, ["--home", str(module_home), "tasks", "show", str(path), "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    TaskSummary.model_validate(data)
    info, u = data["info"], data["info"]["understanding"]
    assert info["family"] == u["family"] == "matmul_epilogue"
    assert info["families"][:2] == ["matmul_epilogue", "matmul"] and "group_norm" in info["families"]
    assert [op["op"] for op in u["ops"]] == ["aten.addmm", "aten.native_group_norm", "aten.sigmoid", "aten.mul"]
    gemm = 2 * 1024 * 1024 * 512 + 1024 * 1024
    assert u["ops"][0]["flops"] == gemm and u["flops"] == gemm + 8 * 1024**2 + 3 * 1024**2 + 1024**2
    assert u["bytes"] == 4 * (1024 * 512 + 1024 * 512 + 1024 + 2 * 1024 + 1024 * 1024)
    assert u["regime"] in ("memory", "compute", "launch") and u["device"]
    assert u["fusion"]["eager_kernels"] == 4 and u["fusion"]["removable_bytes"] > 0
    assert info["tolerance"] == {"atol": 1e-4, "rtol": 1e-4}

    text = CliRunner().invoke(app, ["--home", str(module_home), "tasks", "show", str(path)], catch_exceptions=False)
    assert "families: matmul_epilogue, matmul" in text.stdout and "eager kernels" in text.stdout

    recalled = CliRunner().invoke(app, ["--home", str(module_home), "recall", str(path), "--json"],
                                  catch_exceptions=False)
    r = RecallResult.model_validate(json.loads(recalled.stdout))
    assert r.family == "matmul_epilogue" and "families=matmul_epilogue,matmul" in r.query
    assert {"epilogue-fusion", "tensor-cores"} & {t for i in r.items[:3] for t in i.techniques}
