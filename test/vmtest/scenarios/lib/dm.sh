# lib/dm.sh: device-mapper under the targets' namespaces, sourced after
# the harness's /vm/lib.sh. The Go tests ship dmsetup (with its libraries)
# and the guest kernel's dm-mod, dm-flakey and dm-log-writes modules at
# /lib/dm/ (dmFiles in test/vmtest/dm_test.go); the harness's image has
# neither.

# libdevmapper makes the /dev/mapper nodes itself: there is no udev here.
export DM_DISABLE_UDEV=1

# dm_load: insmod the shipped device-mapper modules.
dm_load() {
	step "insmod dm-mod, dm-flakey, dm-log-writes"
	for _m in dm-mod dm-flakey dm-log-writes; do
		insmod /lib/dm/$_m.ko || fail "insmod $_m"
	done
	wait_for "[ -e /dev/mapper/control ]" 10 || fail "no /dev/mapper/control"
	run dmsetup version
}

# dm_loop FILE MB: a sparse FILE of MB MiB (on the guest's tmpfs: memory
# only for what is written) on a free loop device, printed.
dm_loop() {
	dd if=/dev/zero of="$1" bs=1M count=0 seek="$2" 2>/dev/null || fail "cannot make $1"
	_l=$(losetup -f) || fail "no free loop device"
	losetup "$_l" "$1" || fail "losetup $_l $1"
	echo "$_l"
}

# dm_create NAME TABLE: create /dev/mapper/NAME with TABLE.
dm_create() {
	dmsetup create "$1" --noudevsync --table "$2" || fail "dmsetup create $1 '$2'"
	wait_for "[ -b /dev/mapper/$1 ]" 10 || fail "no /dev/mapper/$1"
}

# dm_reload NAME TABLE: swap NAME's table (IO in flight drains first).
dm_reload() {
	dmsetup suspend --noudevsync "$1" || fail "dmsetup suspend $1"
	dmsetup load "$1" --table "$2" || fail "dmsetup load $1 '$2'"
	dmsetup resume --noudevsync "$1" || fail "dmsetup resume $1"
}

# flakey_table DEV SECTORS MODE: a dm-flakey table over DEV. MODE up
# passes everything; eio fails every read and write; error_writes fails
# writes and passes reads; drop_writes acknowledges writes and drops them.
# (corrupt_bio_byte on reads does nothing in the guest's 6.1 kernel: the
# scenarios write bad bytes under the device instead.)
flakey_table() {
	case $3 in
	up) echo "0 $2 flakey $1 0 1 0" ;;
	eio) echo "0 $2 flakey $1 0 0 1" ;;
	error_writes | drop_writes) echo "0 $2 flakey $1 0 0 1 1 $3" ;;
	*) fail "flakey_table: unknown mode $3" ;;
	esac
}
