#pragma once
// Mutation points for the deterministic simulator (tests/sim, docs/simulation.md): each
// IDEM_SIM_MUTATE(n) marks a place where the simulator can put a known defect back, to show
// that its checks catch it. In every build but the simulator's it is the constant false, and
// the compiler removes the branch: the library's behaviour and cost do not change.

#if defined(IDEM_SIM_MUTANTS)
namespace idem::detail {
/// The defect the simulator runs with (0: none).
inline int sim_mutant = 0;
}  // namespace idem::detail
#define IDEM_SIM_MUTATE(n) (::idem::detail::sim_mutant == (n))
#else
#define IDEM_SIM_MUTATE(n) false
#endif
