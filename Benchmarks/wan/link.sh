#!/usr/bin/env bash
# An emulated WAN between two network namespaces of our own, through wanlink (wanlink.c, beside this).
#
#   Benchmarks/wan/link.sh up [--name N] [--delay-ms RTT] [--loss P] [--rate-mbit R]
#                             [--queue-bytes B] [--seed S]
#   Benchmarks/wan/link.sh down [--name N]
#   Benchmarks/wan/link.sh stats [--name N]      # wanlink's counters (SIGUSR1), two lines: up, down
#
# `up` creates the namespaces N-cli (the client: run tools with `ip netns exec N-cli ...`) and N-srv
# (the server), compiles wanlink into /tmp/N/ when it is missing or older than its source, starts it
# with one TUN device `wan0` in each namespace, and gives them 198.18.0.1 (client) and 198.18.0.2
# (server), point to point, MTU 1500. --loss is a fraction (0.001) or a percentage (0.1%), per
# packet and per direction. --rate-mbit 0 (the default) means no bottleneck. `down` stops wanlink by
# its PID, which removes the devices, and deletes both namespaces; it is safe to run when nothing is
# up. The default name is segget-wan. Needs root, iproute2 and cc.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"
[ -n "$cmd" ] && shift || true
name=segget-wan delay=0 loss=0 rate=0 queue=-1 seed=1
while [ $# -gt 0 ]; do
  case "$1" in
    --name) name="$2" ;;
    --delay-ms) delay="$2" ;;
    --loss) loss="$2" ;;
    --rate-mbit) rate="$2" ;;
    --queue-bytes) queue="$2" ;;
    --seed) seed="$2" ;;
    *) echo "link.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
case "$loss" in *%) loss="$(awk -v p="${loss%\%}" 'BEGIN { printf "%.8f", p / 100 }')" ;; esac

state="/tmp/$name"
cli="$name-cli" srv="$name-srv"
CLIENT_IP=198.18.0.1 SERVER_IP=198.18.0.2

down() {
  if [ -f "$state/pid" ]; then
    pid="$(cat "$state/pid")"
    # Only our own wanlink: the PID file could be stale after a reboot.
    if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "wanlink --ns-a $cli "; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
      [ -d "/proc/$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$state/pid"
  fi
  for ns in "$cli" "$srv"; do
    if ip netns list | grep -qw "^$ns"; then
      ip netns del "$ns" || true
    fi
  done
}

build() {
  mkdir -p "$state"
  if [ ! -x "$state/wanlink" ] || [ "$here/wanlink.c" -nt "$state/wanlink" ]; then
    cc -O2 -Wall -Wextra -o "$state/wanlink.tmp" "$here/wanlink.c"
    mv "$state/wanlink.tmp" "$state/wanlink"
  fi
}

up() {
  down
  build
  trap 'echo "link.sh: setting up the link failed; tearing it down" >&2; down' ERR
  ip netns add "$cli"
  ip netns add "$srv"
  for ns in "$cli" "$srv"; do
    ip -n "$ns" link set lo up
    # IPv4 only: no router solicitations or other IPv6 chatter on the link.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  done
  rm -f "$state/stats" "$state/ready"
  # setsid: its own session, so that a Ctrl-C of the caller's terminal reaches it only through `down`.
  # chrt -f 20: a real-time priority, or compile jobs on a busy machine delay its wake-ups by up to
  # 10 ms (measured: ping at 40 ms RTT averaged 42.9 ms, max 48 ms; with it 40.3 ms, max 43 ms).
  # It cannot monopolise a core: it sleeps in ppoll whenever no packet is due.
  setsid chrt -f 20 "$state/wanlink" --ns-a "$cli" --ns-b "$srv" --delay-ms "$delay" --loss "$loss" \
    --rate-mbit "$rate" --queue-bytes "$queue" --seed "$seed" --stats "$state/stats" \
    >"$state/ready" 2>"$state/wanlink.log" </dev/null &
  echo $! >"$state/pid"
  for _ in $(seq 100); do
    grep -q '^ready' "$state/ready" 2>/dev/null && break
    [ -d "/proc/$(cat "$state/pid")" ] || { cat "$state/wanlink.log" >&2; false; }
    sleep 0.05
  done
  grep -q '^ready' "$state/ready"
  ip -n "$cli" addr add "$CLIENT_IP" peer "$SERVER_IP" dev wan0
  ip -n "$srv" addr add "$SERVER_IP" peer "$CLIENT_IP" dev wan0
  for ns in "$cli" "$srv"; do
    # The TUN devices have no GSO/TSO (no IFF_VNET_HDR): the kernel segments to the MTU before wanlink.
    ip -n "$ns" link set wan0 mtu 1500 txqueuelen 10000 up
  done
  trap - ERR
  echo "link.sh: $name up: $(cat "$state/ready"); client $cli $CLIENT_IP, server $srv $SERVER_IP, wanlink pid $(cat "$state/pid")" >&2
}

stats() {
  pid="$(cat "$state/pid")"
  rm -f "$state/stats"
  kill -USR1 "$pid"
  for _ in $(seq 100); do [ -f "$state/stats" ] && break; sleep 0.02; done
  cat "$state/stats"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  stats) stats ;;
  *) echo "usage: $0 up|down|stats [--name N] [--delay-ms RTT] [--loss P] [--rate-mbit R] [--queue-bytes B] [--seed S]" >&2; exit 2 ;;
esac
