#error "the consumer's own device/ptx.cuh was included in place of mkernel's: an installed header's include is not its own"
