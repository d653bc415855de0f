#pragma once
// The order lifecycle of the tests and examples, as a TransitionTable.

#include "idem/transition_table.hpp"

namespace idem::testing {

inline TransitionTable order_machine() {
  return TransitionTable{"CREATED",
                         {"CREATED", "PAID", "SHIPPED", "COMPLETED", "REFUNDING", "REFUNDED"},
                         {{"PAY", {"CREATED"}, "PAID"},
                          {"SHIP", {"PAID"}, "SHIPPED"},
                          {"COMPLETE", {"SHIPPED"}, "COMPLETED"},
                          {"REFUND", {"PAID"}, "REFUNDING"},
                          {"REFUNDED", {"REFUNDING"}, "REFUNDED"}}};
}

}  // namespace idem::testing
