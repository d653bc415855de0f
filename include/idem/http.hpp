#pragma once
// HTTP helpers for services built on idem, with no HTTP framework dependency (docs/http.md):
//   idem/http/field_value.hpp      what a field value may hold (RFC 9110: no control bytes)
//   idem/http/idempotency_key.hpp  the Idempotency-Key header (IETF draft, an RFC 8941 sf-string)
//   idem/http/problem.hpp          outcome -> status, RFC 9457 problem+json, Retry-After
//   idem/http/stored_response.hpp  a stored response (status, allowed headers, body) to replay

#include "idem/http/field_value.hpp"
#include "idem/http/idempotency_key.hpp"
#include "idem/http/problem.hpp"
#include "idem/http/stored_response.hpp"
