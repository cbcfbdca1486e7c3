// Package faults holds the network-fault tests of the two-VM bed
// (docs/testing.md "The two-VM bed", docs/reliability.md "Network
// faults"): RC streams through uverbs, rdmacm messaging and rpma between
// the two VMs while tc netem, a partition or a link down and up disturbs
// the data link. It has no code of its own; its tests build only with
// the tag purerdma_peer.
package faults
