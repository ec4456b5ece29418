// mkernel: public C++ API (umbrella header).
#pragma once

#include "mkernel/bootstrap.hpp"
#include "mkernel/communicator.hpp"
#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "mkernel/launch_env.hpp"
#include "mkernel/network.hpp"
#include "mkernel/symmetric.hpp"
#include "mkernel/topology.hpp"
