package rdmacm

// Waiting reports whether a goroutine holds the channel's waiter slot
// (a Next in progress), so that tests can order themselves after it.
func (ch *EventChannel) Waiting() bool { return ch.waiting.Load() }
