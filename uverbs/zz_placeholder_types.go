package uverbs

// Placeholders until query.go (GID, MTU) lands; then this file goes.

// GID is a 128-bit global identifier.
type GID [16]byte

// MTU is an IB path MTU enum (ibv_mtu): 1=256 ... 5=4096.
type MTU uint8
