#error "the consumer's own device/ctx.hpp was included in place of mkernel's: an installed header's include is not its own"
