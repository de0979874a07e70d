# SPDX-License-Identifier: GPL-2.0-only
# vmnapd's layers, the one place they are listed.  Each folder of
# host-pager/src is a layer; LAYER_USES_<layer> names the layers its code may
# include and call (directly; nothing else is visible to its compiler).
# Arrows point one way: no layer may use itself through another one.
# scripts/layers.py checks every include and every symbol reference of the
# built objects against this list (make check runs it).
#
#   core    event loop, log, unix sockets: knows nothing of VMs
#   coord   the wait coordinator: a pure state machine on a caller's clock
#   pager   guest RAM: page states, store, fault service, offload, prefetch
#   link    the vmnap protocol session with vmnap.ko over any byte stream
#   vmm     VMM side: pause backends (QMP, freezer, Firecracker, CH), VMM memory
#   vhost   vhost-user back end, virtqueues, the vsock device for QEMU
#   vm      the only layer that knows struct vm: registry, lifecycle, wiring,
#           config, events, guest link listeners, memory handshake, debug
#   api     control API, metrics, main()

VMNAPD_LAYERS	:= core coord pager link vmm vhost vm api

LAYER_USES_core		:=
LAYER_USES_coord	:= core
LAYER_USES_pager	:= core
LAYER_USES_link		:= core
LAYER_USES_vmm		:= core
LAYER_USES_vhost	:= core link
LAYER_USES_vm		:= core coord pager link vmm vhost
LAYER_USES_api		:= core coord pager link vmm vhost vm
