#!/usr/bin/env bash
# The README's "More than one machine" steps, run as written on two hosts made on this machine.
#
#   sudo bash scripts/two_hosts.sh [WORK_DIR]      (root: it makes network and mount namespaces)
#
# Each host is a network namespace with an address of its own on a virtual link between the two (nothing
# outside this machine is reachable from either), its own /tmp, /dev/shm and HOME (so its own ~/.ray, Ray
# session folder and object store). What the two share stands for shared storage: this checkout with its
# .venv, the model and data (copied into WORK_DIR/shared), and the run directory. The head host runs the
# README's head-node lines, the other host its "every other node" lines with the token the head printed, then
# `agentrl train` runs on the head, --dry-run first, with the CPU variant the README gives ("--num-cpus=8
# --num-gpus=1", "agentrl.device=cpu agentrl.nodes=2"). It is killed with kill -9 after its second step and
# run again to the end. The script then checks: every step once in metrics.jsonl, trainer actors on both
# nodes, no actor of the run left alive after the kill, both nodes still up. Everything it started is ended by
# pid (the processes in its two namespaces), and the namespaces are removed. Takes about 5 minutes here.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /var/tmp/agentrl-two-hosts-XXXXXX)}"
WORK="$(mkdir -p "$WORK" && cd "$WORK" && pwd)"
case "$WORK/" in /tmp/*)  # each host's own /tmp would hide it from both hosts
  echo "two_hosts.sh: WORK_DIR must be outside /tmp (each host gets a /tmp of its own): $WORK"; exit 2;; esac
TAG="arl$$"                      # namespace and link names of this run
NET="10.251.$(( $$ % 200 + 20 ))"  # a /24 that lives only on the link between the two namespaces
HEAD_IP="$NET.1"
NODE_IP="$NET.2"
STEPS=6
[ "$(id -u)" = 0 ] || { echo "two_hosts.sh: run as root (it makes network and mount namespaces)"; exit 2; }
[ -x "$REPO/.venv/bin/agentrl" ] || { echo "two_hosts.sh: no $REPO/.venv: run scripts/install.sh first"; exit 2; }

say() { printf '\n== %s\n' "$*"; }

holders=()
cleanup() {
  set +e
  for ns in "$TAG-head" "$TAG-node"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
  done
  sleep 3
  for ns in "$TAG-head" "$TAG-node"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  for p in "${holders[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT

say "two hosts: $TAG-head ($HEAD_IP) and $TAG-node ($NODE_IP); work dir $WORK"
ip netns add "$TAG-head"
ip netns add "$TAG-node"
ip link add "$TAG-h" type veth peer name "$TAG-n"
ip link set "$TAG-h" netns "$TAG-head"
ip link set "$TAG-n" netns "$TAG-node"
for pair in "head $TAG-h $HEAD_IP" "node $TAG-n $NODE_IP"; do
  set -- $pair
  ip -n "$TAG-$1" link set lo up
  ip -n "$TAG-$1" addr add "$3/24" dev "$2"
  ip -n "$TAG-$1" link set "$2" up
  # a default route over the link, so Ray finds this host's address the way it does on a real machine
  ip -n "$TAG-$1" route add default dev "$2"
done

# each host: a process holding a mount namespace of its own, with a private /tmp and /dev/shm
for h in head node; do
  mkdir -p "$WORK/$h/tmp" "$WORK/$h/home"
  ip netns exec "$TAG-$h" unshare --mount --propagation private \
    sh -c "mount --bind '$WORK/$h/tmp' /tmp && mount -t tmpfs -o size=4g tmpfs /dev/shm && exec sleep infinity" &
  holders+=($!)
done
sleep 1
on() {  # on HOST SCRIPT: run SCRIPT with bash in HOST, as a login there would: its HOME, the project's venv
  local h=$1; shift
  local pid=${holders[0]}; [ "$h" = node ] && pid=${holders[1]}
  nsenter -t "$pid" -m -n -- env -i PATH="$REPO/.venv/bin:/usr/local/bin:/usr/bin:/bin" HOME="$WORK/$h/home" \
    LANG=C.UTF-8 RAY_USAGE_STATS_ENABLED=0 bash -c "cd '$WORK/shared' && $*"
}

say "shared storage: the demo model and data, a config that is not the demo's"
mkdir -p "$WORK/shared"
"$REPO/.venv/bin/python" -m agentrl.demo.build "$WORK/shared/demo" > "$WORK/build.log" 2>&1 || {
  tail -20 "$WORK/build.log"; exit 1; }
cat > "$WORK/shared/my.yaml" <<EOF
agentrl:
  name: two-hosts
  model: $WORK/shared/demo/model
  train_data: $WORK/shared/demo/data/train.jsonl
  tools: [calculator]
  rewards:
    - {name: math, weight: 1.0}
  batch_size: 4
  samples_per_prompt: 4
  max_steps: $STEPS
  save_every: 3
  max_prompt_length: 320
  max_response_length: 48
  learning_rate: 0.0005
  run_dir: $WORK/shared/run
  agent: {max_turns: 2, max_tool_calls: 1}
EOF

say "head node: the README's lines"
on head "set -e
export RAY_AUTH_MODE=token
ray get-auth-token --generate > /dev/null     # creates ~/.ray/auth_token unless there is one
ray start --head --port=6379 --num-cpus=8 --num-gpus=1
ray get-auth-token > '$WORK/token'            # prints the token: give it to the other nodes" > "$WORK/head.log" 2>&1 || {
  tail -30 "$WORK/head.log"; exit 1; }
TOKEN=$(tail -n 1 "$WORK/token")
[ -n "$TOKEN" ] || { echo "no token printed"; exit 1; }

say "other node: the README's lines, with the token the head printed"
on node "set -e
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN=$TOKEN
ray start --address=$HEAD_IP:6379 --num-cpus=8 --num-gpus=1" > "$WORK/node.log" 2>&1 || {
  tail -30 "$WORK/node.log"; exit 1; }

STATE='import json, logging, sys
import ray
from ray._private import state
ray.init(logging_level=logging.ERROR, log_to_driver=False, configure_logging=False)
print(json.dumps({"nodes": {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]},
                  "actors": [{"cls": a["ActorClassName"], "state": a["State"], "node": a["Address"]["NodeID"]}
                             for a in state.actors().values()]}))'
state() {
  on head "export RAY_AUTH_MODE=token RAY_ADDRESS=$HEAD_IP:6379; python -c '$STATE' 2>/dev/null | tail -n 1"
}
README_ENV="export RAY_AUTH_MODE=token; export RAY_ADDRESS=$HEAD_IP:6379"
TRAIN="agentrl train my.yaml agentrl.device=cpu agentrl.nodes=2"

say "head node: agentrl train --dry-run"
on head "$README_ENV; $TRAIN --dry-run" > "$WORK/dry-run.log" 2>&1 || { tail -40 "$WORK/dry-run.log"; exit 1; }
grep "Ray cluster at" "$WORK/dry-run.log" | head -1

say "head node: agentrl train, killed with kill -9 after step 2"
started=$(date +%s)
on head "$README_ENV; echo \$\$ > '$WORK/driver.pid'; exec $TRAIN" > "$WORK/train1.log" 2>&1 &
waiter=$!
metrics="$WORK/shared/run/metrics.jsonl"
until grep -q '"step": 2,' "$metrics" 2>/dev/null; do
  kill -0 $waiter 2>/dev/null || { echo "agentrl train ended before step 2"; tail -40 "$WORK/train1.log"; exit 1; }
  [ $(( $(date +%s) - started )) -lt 900 ] || { echo "no step 2 in 15 minutes"; exit 1; }
  sleep 0.5
done
during=$(state)
driver=$(cat "$WORK/driver.pid")  # `agentrl train` itself (the shell exec'd it)
kill -9 "$driver"
echo "killed agentrl train (pid $driver) $(( $(date +%s) - started )) s after it started"
sleep 10
after=$(state)

say "head node: agentrl train again, to the end"
on head "$README_ENV; $TRAIN" > "$WORK/train2.log" 2>&1 || { tail -40 "$WORK/train2.log"; exit 1; }
echo "both attempts: $(( $(date +%s) - started )) s"
final=$(state)

say "checks"
"$REPO/.venv/bin/python" - "$metrics" "$STEPS" "$during" "$after" "$final" <<'EOF'
import json, sys
metrics, steps, during, after, final = sys.argv[1], int(sys.argv[2]), *map(json.loads, sys.argv[3:])
lines = [json.loads(x) for x in open(metrics) if x.strip()]
written = [m["step"] for m in lines if not m.get("validation")]
ok = True
def check(cond, what):
    global ok
    ok &= bool(cond)
    print(("ok   " if cond else "FAIL ") + what)
check(written == list(range(1, steps + 1)), f"metrics.jsonl has every step once: {written}")
nodes = during["nodes"]
print("nodes:", nodes)
trainers = {a["node"] for a in during["actors"] if a["state"] == "ALIVE" and "WorkerDict" in a["cls"]}
print("actors during the run:", sorted((nodes.get(a["node"]), a["cls"]) for a in during["actors"] if a["state"] == "ALIVE"))
check(len(nodes) == 2 and trainers == set(nodes), f"trainer ranks on both nodes during the run: {sorted(nodes[n] for n in trainers)}")
alive = [a["cls"] for a in after["actors"] if a["state"] != "DEAD"]
check(not alive, f"no actor alive 10 s after kill -9: {alive}")
check(set(after["nodes"]) == set(nodes), "both nodes up after the kill")
check(set(final["nodes"]) == set(nodes), "both nodes up after the second run")
sys.exit(0 if ok else 1)
EOF
