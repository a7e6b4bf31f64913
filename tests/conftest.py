"""Shared pytest fixtures. Each area keeps its fixtures in its own module, imported here."""

from hub_fixtures import *  # noqa: F401,F403  (hub, hub_env)
from push_fixtures import *  # noqa: F401,F403,E402  (built_scale, scale_project, ...)
from matrix_fixtures import *  # noqa: F401,F403,E402  (local_matrix, ...)
from smoke_fixtures import *  # noqa: F401,F403,E402  (broken_project, broken_cuda_project, noarch_project, ...)
