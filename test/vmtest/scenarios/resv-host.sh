# vm-modules: nvme-tcp crc32c-intel crc32c_generic
# resv-host: the guest kernel's nvme-tcp host and nvme-cli drive NVMe
# reservations on an nvstripe target running on the host's 127.0.0.1:$port
# (run-vm.sh --to-host HP:$port). Only the host-driver direction can be
# checked here: the guest kernel (6.1) predates nvmet reservations (6.13).
#
# The host side (nvmeof/initiator TestLinuxHostReservationsVM) has already
# registered key $hostkey under another host ID and holds a write-exclusive
# reservation. The guest registers, sees both registrants in the report,
# is refused a write (reads pass), cannot acquire, preempts the host key,
# writes (also 128 KiB per command, which the target takes in-capsule),
# releases and unregisters, checking the report after each step.
# Parameters: nqn (required), port (4420), hostkey (required).
[ -n "${nqn:-}" ] && [ -n "${hostkey:-}" ] || fail "parameters nqn= and hostkey= are required"
port=${port:-4420}
key=0x1234
hid=7e57a5e5-0000-4000-8000-00000000c0de

step "connect to host target $HOST_ADDR:$port nqn=$nqn hostid=$hid"
ctrl=$(nvme_connect "$HOST_ADDR" "$port" "$nqn" "hostnqn=nqn.2014-08.org.nvmexpress:uuid:$hid,hostid=$hid") ||
	fail "nvme connect failed"
wait_for "nvme_ns_dev $ctrl 1" 30 || fail "no namespace 1 on $ctrl"
ns=$(nvme_ns_dev "$ctrl" 1)
wait_bdev "$ns" 30 || fail "$ns has no size"
pattern_file /tmp/pattern 1

# report FIELD VALUE...: the extended report has every "FIELD : VALUE" pair.
report() {
	_r=$(nvme resv-report "$ns" --eds 2>&1) || fail "resv-report failed: $_r"
	echo "$_r" | sed "s/^/[$scenario]   /"
	while [ $# -ge 2 ]; do
		echo "$_r" | grep -Eiq "^ *$1 *: *(0x)?$2\$" || fail "report: want $1 = $2"
		shift 2
	done
}
write_block() { dd if=/tmp/pattern of="$ns" bs=4096 count=1 oflag=direct 2>/dev/null; }

step "the host-side holder's reservation is visible"
report rtype 1 regctl 1 rkey "$(printf '%x' "$hostkey")"

step "register key $key"
nvme resv-register "$ns" --nrkey=$key --rrega=0 || fail "resv-register failed"
report rtype 1 regctl 2

step "a registrant that does not hold write-exclusive: write refused, read allowed"
write_block && fail "write succeeded under another host ID's write-exclusive reservation"
dd if="$ns" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null || fail "read refused under write-exclusive"
nvme resv-acquire "$ns" --crkey=$key --rtype=1 --racqa=0 && fail "acquire succeeded while another host holds"

step "preempt the host-side key"
nvme resv-acquire "$ns" --crkey=$key --prkey="$hostkey" --rtype=1 --racqa=1 || fail "preempt failed"
report rtype 1 regctl 1 rkey 1234 rcsts 1
write_block || fail "holder's write refused"
say "holder's write accepted"

step "128 KiB writes, each sent with its command (in-capsule), read back"
dd if=/tmp/pattern of="$ns" bs=128k count=8 oflag=direct 2>/dev/null || fail "128 KiB writes refused"
dd if="$ns" of=/tmp/back bs=128k count=8 iflag=direct 2>/dev/null || fail "reading the 128 KiB writes back failed"
cmp -s /tmp/pattern /tmp/back || fail "128 KiB writes read back different"

step "release and unregister"
nvme resv-release "$ns" --crkey=0x9999 --rtype=1 --rrela=0 && fail "release with a wrong key succeeded"
nvme resv-release "$ns" --crkey=$key --rtype=1 --rrela=0 || fail "resv-release failed"
report rtype 0 regctl 1
nvme resv-register "$ns" --crkey=$key --rrega=1 || fail "unregister failed"
report rtype 0 regctl 0

step "disconnect"
nvme_disconnect "$ctrl"
wait_for "[ ! -e /sys/class/nvme/$ctrl ]" 20 || fail "$ctrl still present after delete"
