#!/usr/bin/env bash
# Separate RPC hosts on one machine: each host is a network namespace joined
# to this one by a veth pair, with one ggml-rpc-server listening inside.
# Needs root and iproute2 (ip, tc).
#
#   rpc-hosts.sh up N [options]   make N hosts; prints "name endpoint pid" per host
#   rpc-hosts.sh down [--prefix P] remove them (servers, namespaces, links)
#
# options:
#   --prefix P      names of namespaces and links (default gglh; at most 8 characters)
#   --subnet A.B    host i is A.B.i.2, this side A.B.i.1 (default 10.213)
#   --port N        server port (default 50052)
#   --rate R        limit each link, both ways, with tc tbf (e.g. 1gbit, 10gbit)
#   --delay D       add latency with tc netem (e.g. 1ms; the kernel needs netem)
#   --cache DIR     start the servers with their file cache (-c) under DIR/hostI
#   --thp           the servers' allocations get transparent huge pages (glibc's
#                   malloc.hugetlb tunable): their page faults stop bounding a load
#   --server BIN    ggml-rpc-server to run (default: the native set's)
#
# State (server pids, logs) lives in /run/ggload-rpc-hosts/P.
. "$(dirname "$0")/lib.sh"

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[ $# -ge 1 ] || usage
action=$1; shift
n=0
if [ "$action" = up ]; then
	[ $# -ge 1 ] || usage
	n=$1; shift
	[[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up: the host count must be 1-99, not '$n'"
fi
prefix=gglh subnet=10.213 port=50052 rate="" delay="" cache="" server="" thp=""
while [ $# -gt 0 ]; do
	case $1 in
	--prefix) prefix=$2; shift 2 ;;
	--subnet) subnet=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--delay) delay=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--thp) thp=1; shift ;;
	--server) server=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix '$prefix': 1-8 lowercase letters and digits"
[[ "$subnet" =~ ^[0-9]{1,3}\.[0-9]{1,3}$ ]] || die "--subnet '$subnet': want A.B"
state=/run/ggload-rpc-hosts/$prefix

need_root() {
	[ "$(id -u)" = 0 ] || die "network namespaces need root"
	command -v ip >/dev/null || die "ip not found (install iproute2)"
}

down() {
	if [ -d "$state" ]; then
		for f in "$state"/*.pid; do
			[ -f "$f" ] || continue
			kill -9 "$(cat "$f")" 2>/dev/null || true
		done
	fi
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}[0-9]+$" || true); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
		ip netns del "$ns"
	done
	for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep -E "^${prefix}v[0-9]+$" || true); do
		ip link del "$link" 2>/dev/null || true
	done
	rm -rf "$state"
}

# shape DEV [NS]: the rate limit and the delay on one side of a link
shape() {
	local dev=$1 ns=${2:-} run=()
	[ -n "$ns" ] && run=(ip netns exec "$ns")
	if [ -n "$delay" ]; then
		local netem=(netem delay "$delay")
		[ -n "$rate" ] && netem+=(rate "$rate")
		"${run[@]}" tc qdisc add dev "$dev" root "${netem[@]}" 2>/dev/null ||
			die "tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM); run without --delay"
	elif [ -n "$rate" ]; then
		# a token bucket holding 10 ms of traffic (at least 64 KiB)
		local bits burst
		bits=$(tc_rate_bits "$rate")
		burst=$((bits / 8 / 100))
		[ "$burst" -ge 65536 ] || burst=65536
		"${run[@]}" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 50ms ||
			die "tc tbf refused rate $rate"
	fi
}

tc_rate_bits() {
	local r=${1,,} num unit
	num=${r%%[a-z]*}; unit=${r#"$num"}
	case $unit in
	gbit) echo $((num * 1000000000)) ;;
	mbit) echo $((num * 1000000)) ;;
	kbit) echo $((num * 1000)) ;;
	bit | "") echo "$num" ;;
	*) die "--rate '$1': use kbit, mbit or gbit" ;;
	esac
}

# start_server I: host I's server, in its namespace
start_server() {
	local i=$1 ns=$prefix$1 args=(-H "$subnet.$1.2" -p "$port") env=()
	if [ -n "$cache" ]; then
		mkdir -p "$cache/host$i"
		args+=(-c)
		env+=(LLAMA_CACHE="$cache/host$i")
	fi
	[ -z "$thp" ] || env+=(GLIBC_TUNABLES=glibc.malloc.hugetlb=1)
	ip netns exec "$ns" env "${env[@]}" setsid "$server" "${args[@]}" >>"$state/host$i.log" 2>&1 &
	echo $! >"$state/host$i.pid"
}

# wait_server I: wait up to 10 s for host I's server to accept connections;
# a server that does not is killed (and noted in its log)
wait_server() {
	local i=$1 addr=$subnet.$1.2 pid
	pid=$(cat "$state/host$i.pid")
	for _ in $(seq 1 100); do
		timeout 1 bash -c "exec 3<>/dev/tcp/$addr/$port" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	{
		echo "rpc-hosts.sh: server $pid not listening; state $(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null), wchan $(cat "/proc/$pid/wchan" 2>/dev/null)"
	} >>"$state/host$i.log"
	kill -9 "$pid" 2>/dev/null || true
	return 1
}

up() {
	need_root
	command -v tc >/dev/null || [ -z "$rate$delay" ] || die "tc not found (install iproute2)"
	if [ -z "$server" ]; then
		for d in "$LIBROOT"/*/; do
			[ -x "$d/ggml-rpc-server" ] && server="$d/ggml-rpc-server" && break
		done
	fi
	[ -n "$server" ] && [ -x "$server" ] || die "no ggml-rpc-server (scripts/build-native.sh linux-x64 cpu,rpc)"
	down
	mkdir -p "$state"
	trap 'down' ERR
	local i ns host peer addr
	for i in $(seq 1 "$n"); do
		ns=$prefix$i host=${prefix}v$i peer=${prefix}p$i addr=$subnet.$i.2
		ip netns add "$ns"
		ip link add "$host" type veth peer name "$peer"
		ip link set "$peer" netns "$ns"
		ip addr add "$subnet.$i.1/24" dev "$host"
		ip link set "$host" up
		ip netns exec "$ns" ip addr add "$addr/24" dev "$peer"
		ip netns exec "$ns" ip link set "$peer" up
		ip netns exec "$ns" ip link set lo up
		shape "$host"
		shape "$peer" "$ns"
		start_server "$i"
	done
	for i in $(seq 1 "$n"); do
		wait_server "$i" || { start_server "$i" && wait_server "$i"; } || {
			cat "$state/host$i.log" >&2
			die "server of host $i did not listen on $subnet.$i.2:$port"
		}
		printf 'host%d %s:%s %s\n' "$i" "$subnet.$i.2" "$port" "$(cat "$state/host$i.pid")"
	done
	trap - ERR
}

case $action in
up) up ;;
down) need_root; down ;;
*) usage ;;
esac
