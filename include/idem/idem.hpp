#pragma once
// idem: make service handlers idempotent. The umbrella header: the core and the header-only
// in-memory stores. The compiled adapters have their own headers under idem/stores/.

#include "idem/clock.hpp"
#include "idem/codec.hpp"
#include "idem/context.hpp"
#include "idem/error.hpp"
#include "idem/fingerprint.hpp"
#include "idem/guard.hpp"
#include "idem/key.hpp"
#include "idem/layered_guard.hpp"
#include "idem/observer.hpp"
#include "idem/options.hpp"
#include "idem/outcome.hpp"
#include "idem/result.hpp"
#include "idem/store.hpp"
#include "idem/stores/cached_store.hpp"
#include "idem/stores/memory_request_id_cache.hpp"
#include "idem/stores/memory_store.hpp"
#include "idem/stores/memory_token_store.hpp"
#include "idem/transition_table.hpp"
#include "idem/version.hpp"
