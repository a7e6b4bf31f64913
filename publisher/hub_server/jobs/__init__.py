"""The Hub-compatible server's Jobs API: api.py (routes), board.py (the jobs
and their lifecycle), spec.py (the create-job payload), hardware.py (flavours,
from resources/jobs_hardware.yaml), log.py, metrics.py, volumes.py, and the
executors behind executor.py (docker_executor.py, process_executor.py)."""
