#error "the consumer's own device/net/cmd_queue.hpp was included in place of mkernel's: an installed header's include is not its own"
