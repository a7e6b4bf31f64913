#!/bin/sh
# Runs once while the builder image is built: Python (a venv at
# /opt/publisher), g++, git, and publisher's dependencies. Works on Debian/
# Ubuntu (apt) and on manylinux / RHEL-family images (dnf/yum).
set -eu
setup=/opt/publisher-setup

if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3 python3-venv python3-dev g++ git ca-certificates >/dev/null
  rm -rf /var/lib/apt/lists/*
elif command -v dnf >/dev/null || command -v yum >/dev/null; then
  pm=$(command -v dnf || command -v yum)
  command -v g++ >/dev/null || "$pm" install -y -q gcc-c++
  command -v git >/dev/null || "$pm" install -y -q git
fi

# manylinux images keep their interpreters in /opt/python; prefer CPython 3.11.
python=python3
for candidate in /opt/python/cp311-cp311/bin/python3 /opt/python/cp312-cp312/bin/python3; do
  if [ -x "$candidate" ]; then python=$candidate; break; fi
done
"$python" -m venv /opt/publisher

[ -n "${PIP_INDEX_URL:-}" ] || unset PIP_INDEX_URL
[ -n "${PIP_EXTRA_INDEX_URL:-}" ] || unset PIP_EXTRA_INDEX_URL
export PIP_CERT="$setup/ca-bundle.crt" PIP_DISABLE_PIP_VERSION_CHECK=1
/opt/publisher/bin/pip install --quiet --no-cache-dir -r "$setup/requirements.txt"

# `publisher` on PATH runs the copied source (PYTHONPATH=/opt/publisher-src).
printf '#!/bin/sh\nexec /opt/publisher/bin/python -m publisher "$@"\n' > /opt/publisher/bin/publisher
chmod +x /opt/publisher/bin/publisher
