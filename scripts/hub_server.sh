# Sourced by the developer scripts that publish on the GPU machine: `start_hub_server DIR` starts
# `publisher hub-server` (the Hub-compatible server, no org trusted, the process job executor) on a
# free port with its data in DIR, stops it when the script exits, and exports HF_ENDPOINT, HF_TOKEN
# (a random token) and HF_HUB_DISABLE_XET for the commands after it.
start_hub_server() {
  local dir=$1 token url
  token="hf_$(python3 -c 'import secrets,string; print("".join(secrets.choice(string.ascii_letters) for _ in range(34)))')"
  publisher hub-server --port 0 --data-dir "$dir/hub" --token "$token" --jobs-executor process >"$dir/server.log" 2>&1 &
  HUB_SERVER_PID=$!
  trap 'kill $HUB_SERVER_PID 2>/dev/null || true' EXIT
  for _ in $(seq 50); do grep -o 'http://127.0.0.1:[0-9]*' "$dir/server.log" >/dev/null 2>&1 && break; sleep 0.2; done
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/server.log" | head -1)
  [ -n "$url" ] || { echo "publisher hub-server did not start: $(tail -3 "$dir/server.log")" >&2; return 1; }
  export HF_ENDPOINT=$url HF_TOKEN=$token HF_HUB_DISABLE_XET=1
}
