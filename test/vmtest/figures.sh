#!/usr/bin/env bash
# Runs scenarios/figures-ublk-nbd.sh in the VM harness: the same in-memory
# device over ublk and over NBD, the same fio job (dd without fio),
# interleaved; prints the @@INFO figure lines (server CPU per GiB, system
# calls per request with strace; fio and strace are copied into the guest
# with their libraries).
# Usage: test/vmtest/figures.sh [KEY=VALUE...]   (VM_DIR: the harness; default
# ../shared/vm next to the repository; RUN_DIR: default a temporary folder)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
vm=${VM_DIR:-$root/../shared/vm}
run_dir=${RUN_DIR:-$(mktemp -d)/figures}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
ko=$("$vm/build-ublk-module.sh")
(cd "$root" && CGO_ENABLED=0 go test -c -o "$bin/ublk.test" ./ublk)
files=(--file "$ko:/lib/ublk_drv.ko" --file "$bin/ublk.test:/ublk.test")
for tool in strace fio; do # with their libraries, when this host has them
	st=$(command -v $tool) || continue
	files+=(--file "$st:/usr/bin/$tool")
	for lib in $(ldd "$st" | awk '/=>/ {print $3}'); do
		files+=(--file "$(readlink -f "$lib"):$lib")
	done
done
"$vm/run-vm.sh" --run-dir "$run_dir" --timeout 1200 --quiet "${files[@]}" "$here/scenarios/figures-ublk-nbd.sh" "$@" || {
	echo "figures run failed; console: $run_dir/console.log" >&2
	exit 1
}
grep -a '@@INFO figure' "$run_dir/console.log"
