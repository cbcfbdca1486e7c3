#!/bin/sh
# rxevm's initramfs /init (busybox). Any failure powers the VM off; the
# host then reports that the VM never reached the command.
PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

fail() {
	echo "rxevm-init: $*" >/dev/console
	echo "$*" >/out/init-error 2>/dev/null
	sync
	poweroff -f
}

for m in $(cat /modules.order); do
	insmod "/lib/modules/$m" || fail "insmod $m failed"
done

p9=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$p9" out /out || fail "cannot mount the out share"
mount -t 9p -o "$p9,ro,cache=loose" host /host || fail "cannot mount the host share"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
	fail "cannot mount the overlay root"

r=/newroot
mount -t proc proc $r/proc
mount -t sysfs sysfs $r/sys
mount -t devtmpfs devtmpfs $r/dev
mkdir -p $r/dev/pts $r/dev/shm
# devtmpfs has no /dev/fd and friends; shells need them (process
# substitution, /dev/stdin).
ln -s /proc/self/fd $r/dev/fd
ln -s /proc/self/fd/0 $r/dev/stdin
ln -s /proc/self/fd/1 $r/dev/stdout
ln -s /proc/self/fd/2 $r/dev/stderr
mount -t devpts devpts $r/dev/pts
mount -t tmpfs shm $r/dev/shm
mount -t tmpfs run $r/run
mkdir -p $r/run/rxevm
mount --move /out $r/run/rxevm || fail "cannot move the out share"

# Writable host folders (-rw): "tag path" lines.
while read -r tag path; do
	[ -n "$tag" ] || continue
	mount -t 9p -o "$p9" "$tag" "$r$path" || fail "cannot mount $path read-write"
done <$r/run/rxevm/shares

exe=$(cat $r/run/rxevm/exe) || fail "no runner path"
exec chroot $r "$exe" __rxevm_guest__
