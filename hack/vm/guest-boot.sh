#!/bin/sh
# Installed in the rootfs: mounts the host's 9p share and runs its guest.sh
# (kept in the share so changing the tests never rebuilds the root disk).
# Without the share there is nothing to do: power off.
mkdir -p /mnt/share
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 share /mnt/share; then
  echo "latencytier-vmtest: cannot mount the 9p share" >/dev/console
  exec systemctl poweroff --force
fi
exec /bin/sh /mnt/share/guest.sh
