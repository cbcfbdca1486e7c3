package uverbs

// MW is a memory window (ibv_mw). (Being written.)
type MW struct {
	resource
	rkey uint32
}
