#pragma once
// idem: make service handlers idempotent. The umbrella header: the core and the memory store.

#include "idem/clock.hpp"
#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/error.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/stores/memory_store.hpp"
#include "idem/version.hpp"
