#error "the consumer's own device/signals.cuh was included in place of mkernel's: an installed header's include is not its own"
