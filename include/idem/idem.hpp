#pragma once
// idem: make service handlers idempotent. The umbrella header: the core and the header-only
// stores and guards; the compiled backends have their own folders.

#include "idem/cached_store.hpp"
#include "idem/completer.hpp"
#include "idem/core.hpp"
#include "idem/layered_guard.hpp"
#include "idem/memory/request_id_cache.hpp"
#include "idem/memory/store.hpp"
#include "idem/memory/token_store.hpp"
#include "idem/transition_table.hpp"
