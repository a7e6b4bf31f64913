"""On a GPU machine: the hub-server's process executor runs a GPU-flavour job
that sees this machine's GPU (a check for the device, not a pytest test).

    python tests/gpu_jobs_check.py        # from the repository root; exit 0 = every check held

It starts a Hub-compatible server (process executor) in this process, commits a
private model repo, runs an `h200` job through the real huggingface_hub client
that mounts the repo read-only and runs `nvidia-smi -L` and torch's CUDA device
query, follows its log, samples its metrics while it runs, and prints one JSON
summary line. Needs huggingface_hub >= 2, torch with CUDA, root (for the mount).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from huggingface_hub import CommitOperationAdd, HfApi, Volume  # noqa: E402

from publisher.hub_server.server import HubServer, ServerConfig  # noqa: E402

USER = "publisher-dev"
SCRIPT = """
nvidia-smi -L
cat /mnt/gpu-check/msg.txt
{python} -c 'import torch; print("torch sees", torch.cuda.get_device_name(0))'
sleep 4
"""


def main() -> int:
    token = "hf_" + "g" * 34
    checks: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as data:
        server = HubServer(Path(data), ServerConfig(tokens={token: "write"}, jobs_executor="process")).start()
        try:
            api = HfApi(endpoint=server.url, token=token)
            api.create_repo(f"{USER}/gpu-check", private=True)
            api.create_commit(f"{USER}/gpu-check", [CommitOperationAdd("msg.txt", b"mounted from the server\n")],
                              commit_message="check")
            job = api.run_job(image="pytorch/pytorch:latest", flavor="h200", namespace=USER, timeout=300,
                              command=["sh", "-c", SCRIPT.format(python=sys.executable)],
                              volumes=[Volume(type="model", source=f"{USER}/gpu-check", mount_path="/mnt/gpu-check")])
            api.wait_for_job(job.id, namespace=USER, stages=["RUNNING"], poll_interval=0.2)
            time.sleep(1)
            sample = next(iter(api.fetch_job_metrics(job_id=job.id, namespace=USER)), {})
            lines = list(api.fetch_job_logs(job_id=job.id, namespace=USER, follow=True))
            done = api.wait_for_job(job.id, namespace=USER)
        finally:
            server.close()
    checks["completed"] = done.status.stage == "COMPLETED"
    checks["nvidia-smi lists a GPU"] = any(line.startswith("GPU 0:") for line in lines)
    checks["torch sees the GPU"] = any(line.startswith("torch sees ") for line in lines)
    checks["the volume was mounted"] = "mounted from the server" in lines
    checks["no 'runs without a GPU' note"] = not any("without one" in line for line in lines)
    checks["metrics report the GPU"] = bool(sample.get("gpus"))
    print(json.dumps({"ok": all(checks.values()), "checks": checks, "stage": done.status.stage,
                      "message": done.status.message, "log": lines, "metrics": sample}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
