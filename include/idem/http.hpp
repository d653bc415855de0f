#pragma once
// HTTP helpers for services built on idem, with no HTTP framework dependency (docs/http.md): field
// values, the Idempotency-Key header, problem+json answers and stored responses.

#include "idem/http/field_value.hpp"
#include "idem/http/idempotency_key.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/stored_response.hpp"
