"""An in-process run counts this machine's GPUs only when its devices name cuda (so a CUDA
device actor can run without Ray), and a CPU run never imports torch to find out."""
from __future__ import annotations

import subprocess
import sys

from pairflow.engine.pairs.config import AllPairsConfig
from pairflow.engine.pairs.workers.executor import local_node
from pairflow.engine.pairs.plan.sizing import plan_nodes


def test_a_cpu_run_counts_no_gpu_and_imports_no_torch():
    code = ("import sys; from pairflow.engine.pairs.workers.executor import local_gpus; "
            "print(local_gpus('cpu'), local_gpus('auto'), local_gpus('torch-cpu'), "
            "'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["0", "0", "0", "False"]


def test_a_local_node_with_a_gpu_gets_one_cuda_actor():
    node = local_node(4, 64, gpus=1)
    cuda = plan_nodes([node], AllPairsConfig(devices="cuda"))[0]
    assert (cuda.actors, cuda.device, cuda.preprocess_on_host) == (1, "cuda", False)
    cpu = plan_nodes([local_node(4, 64)], AllPairsConfig(devices="cuda"))[0]
    assert (cpu.actors, cpu.device) == (4, "cpu")  # no GPU here: the CPU, as on Ray
