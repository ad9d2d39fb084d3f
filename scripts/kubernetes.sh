#!/usr/bin/env bash
# kubernetes.sh builds, starts and stops a throw-away Kubernetes API server
# (kube-apiserver and its etcd, nothing else: no scheduler, no kubelet) for
# leaderrun's tests. Everything binds 127.0.0.1 only, lives in one
# directory, and is stopped by the PIDs recorded there (never by name).
#
#   scripts/kubernetes.sh build
#       Make sure the binaries are in the cache,
#       ${XDG_CACHE_HOME:-~/.cache}/leaderrun/kubernetes/ (etcd-3.6.16 and
#       kube-apiserver-1.37.2): build them there, niced, from the modules in
#       scripts/kubernetes/{etcd,apiserver} when they are missing. Debian has
#       no kube-apiserver and an etcd too old for it. The first build takes
#       about an hour on a loaded 2-core machine and 5 GB of Go build cache;
#       later calls cost nothing. Concurrent calls wait for one build.
#   scripts/kubernetes.sh start DIR
#       Build if needed, start etcd and kube-apiserver (RBAC authorization,
#       a service-account key pair, static-token users), wait for /readyz,
#       write DIR/env:
#         LEADERRUN_TEST_KUBECONFIG=DIR/admin.kubeconfig  (user admin, system:masters)
#         LEADERRUN_TEST_KUBE_LIMITED_KUBECONFIG=DIR/limited.kubeconfig
#                   (user "limited", no permissions until a test binds a Role)
#         LEADERRUN_TEST_KUBE_APISERVER_PID=PID  LEADERRUN_TEST_KUBE_ETCD_PID=PID
#         LEADERRUN_TEST_KUBE_URL=https://127.0.0.1:PORT
#       DIR/pids lists both PIDs; DIR/*.log their logs.
#   scripts/kubernetes.sh stop DIR
#       SIGCONT, SIGTERM (then SIGKILL) the PIDs in DIR/pids that are still
#       this directory's servers.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)

cache=${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/kubernetes
etcd_bin=$cache/etcd-3.6.16
api_bin=$cache/kube-apiserver-1.37.2
kubectl_bin=$cache/kubectl-1.37.2

# build_one SRC PKG OUT: go build PKG from the module in SRC into OUT
# (through a temporary name, so a cut-short build leaves no binary).
build_one() {
	local src=$1 pkg=$2 out=$3 tmp
	[ -x "$out" ] && return 0
	tmp=$(mktemp -d "$cache/build.XXXXXX")
	cp "$src"/go.mod "$src"/go.sum "$src"/tools.go "$tmp/"
	echo "${0##*/}: building $pkg into $out (long the first time; log in $cache/build.log)" >&2
	(cd "$tmp" && nice -n 10 go build -o "$out.tmp" "$pkg") >>"$cache/build.log" 2>&1 ||
		{ rm -rf "$tmp"; die "building $pkg failed (see $cache/build.log)"; }
	mv "$out.tmp" "$out"
	rm -rf "$tmp"
}

cmd_build() {
	mkdir -p "$cache"
	[ -x "$etcd_bin" ] && [ -x "$api_bin" ] && [ -x "$kubectl_bin" ] && return 0
	command -v go >/dev/null || die "go is not on PATH"
	# One build at a time: a second caller waits for the first.
	exec 9>"$cache/build.lock"
	flock 9
	build_one "$here/kubernetes/etcd" go.etcd.io/etcd/server/v3 "$etcd_bin"
	build_one "$here/kubernetes/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$api_bin"
	# The tests edit and delete Leases with kubectl, which Debian does not
	# package: built from the same module, put on PATH by test.sh (bin/).
	build_one "$here/kubernetes/apiserver" k8s.io/kubernetes/cmd/kubectl "$kubectl_bin"
	mkdir -p "$cache/bin"
	ln -sf "$kubectl_bin" "$cache/bin/kubectl"
	echo BUILD-DONE >>"$cache/build.log"
}

# kill_pid DIR PID: stop PID if it is still one of DIR's servers.
kill_pid() {
	local dir=$1 pid=$2
	[ -r "/proc/$pid/cmdline" ] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/" || return 0
	stop_pid "$pid" TERM 40
}

# certs DIR: a CA, a serving certificate for 127.0.0.1, and the
# service-account key pair.
certs() {
	local d=$1/pki
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=leaderrun-test-ca \
		-keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$d/ext"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
		-extfile "$d/ext" -out "$d/server.crt" 2>/dev/null
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
	chmod 600 "$d"/*.key
}

# kubeconfig FILE URL CA USER TOKEN
kubeconfig() {
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: $2
    certificate-authority: $3
users:
- name: $4
  user:
    token: $5
contexts:
- name: $4@test
  context:
    cluster: test
    user: $4
    namespace: default
current-context: $4@test
EOF
	chmod 600 "$1"
}

# wait_ready PID URL CA TOKEN: until /readyz answers ok (about 60 s at most).
wait_ready() {
	local i
	for i in $(seq 1 600); do
		curl -sf --max-time 2 --cacert "$3" -H "Authorization: Bearer $4" "$2/readyz" >/dev/null 2>&1 && return 0
		alive "$1" || return 1
		sleep 0.1
	done
	return 1
}

cmd_start() {
	[ $# -eq 1 ] || die "usage: kubernetes.sh start DIR"
	mkdir -p "$1"
	local dir eport pport aport epid apid admin limited url
	dir=$(cd "$1" && pwd)
	cmd_build
	command -v curl >/dev/null || apt_ensure curl -- curl
	certs "$dir"
	admin=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	limited=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s,admin,admin-uid,system:masters\n%s,limited,limited-uid\n' "$admin" "$limited" >"$dir/pki/tokens.csv"
	chmod 600 "$dir/pki/tokens.csv"
	# Ports as etcd.sh picks them (10000-19999, below the ephemeral range).
	free_port 10000 10000
	eport=$port
	free_port 10000 10000
	pport=$port
	free_port 10000 10000
	aport=$port
	"$etcd_bin" --name k8s --data-dir "$dir/etcd-data" \
		--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "k8s=http://127.0.0.1:$pport" --log-outputs stderr \
		</dev/null >"$dir/etcd.log" 2>&1 &
	epid=$!
	echo "$epid" >>"$dir/pids"
	url=https://127.0.0.1:$aport
	"$api_bin" --etcd-servers "http://127.0.0.1:$eport" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
		--secure-port "$aport" --tls-cert-file "$dir/pki/server.crt" --tls-private-key-file "$dir/pki/server.key" \
		--cert-dir "$dir/pki" --authorization-mode RBAC --token-auth-file "$dir/pki/tokens.csv" \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/pki/sa.pub" \
		--service-account-signing-key-file "$dir/pki/sa.key" --service-cluster-ip-range 10.0.0.0/24 \
		--enable-priority-and-fairness=false --endpoint-reconciler-type none \
		</dev/null >"$dir/apiserver.log" 2>&1 &
	apid=$!
	echo "$apid" >>"$dir/pids"
	if ! wait_ready "$apid" "$url" "$dir/pki/ca.crt" "$admin"; then
		tail -n 5 "$dir/apiserver.log" "$dir/etcd.log" >&2 || true
		cmd_stop "$dir"
		die "kube-apiserver did not become ready (see $dir/apiserver.log)"
	fi
	kubeconfig "$dir/admin.kubeconfig" "$url" "$dir/pki/ca.crt" admin "$admin"
	kubeconfig "$dir/limited.kubeconfig" "$url" "$dir/pki/ca.crt" limited "$limited"
	{
		echo "LEADERRUN_TEST_KUBECONFIG=$dir/admin.kubeconfig"
		echo "LEADERRUN_TEST_KUBE_LIMITED_KUBECONFIG=$dir/limited.kubeconfig"
		echo "LEADERRUN_TEST_KUBE_URL=$url"
		echo "LEADERRUN_TEST_KUBE_APISERVER_PID=$apid"
		echo "LEADERRUN_TEST_KUBE_ETCD_PID=$epid"
	} >>"$dir/env"
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: kubernetes.sh stop DIR"
	local dir
	[ -f "$1/pids" ] || return 0
	dir=$(cd "$1" && pwd)
	stop_listed "$dir" kill_pid "$dir"
}

case ${1:-} in
build) shift; cmd_build ;;
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: kubernetes.sh build | start DIR | stop DIR" ;;
esac
