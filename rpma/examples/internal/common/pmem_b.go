package common

// MemForAt is MemFor with MapPMemAt's offset.
func MemForAt(args []string, i, offset, size int, init func(b []byte) int) (*Mem, error) {
	if len(args) > i {
		return MapPMemAt(args[i], offset, size, init)
	}
	return MemFor(args, i, size, init)
}
