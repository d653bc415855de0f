#pragma once
// idem's light header: the guard and what it is written against, without any concrete store; the
// umbrella idem/idem.hpp adds the header-only stores and guards (docs/building.md).

#include "idem/attempt.hpp"
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
#include "idem/version.hpp"
