package uverbs

// AH is an address handle (ibv_ah). (Being written.)
type AH struct {
	resource
	num uint32 // rxe: the kernel's AH index for UD send WQEs
}
