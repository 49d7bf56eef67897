// Fisher's exact test of a 2 × 2 table of counts: is the rate of an event (a divergence) the same
// in two groups? Equal to scipy.stats.fisher_exact (tests/client/claims_scipy_check.py). Pure.
#pragma once

namespace spheret::client {

// The two-sided p-value of the table [[a_events, a_total − a_events], [b_events, b_total −
// b_events]]: the sum of the hypergeometric probabilities of every table with the same margins
// that is no more probable than the observed one (within a relative 1e-7). 1 when
// either total is 0 or no event (or every trial) had one. Preconditions: 0 <= events <= total.
double FisherExactTwoSided(int a_events, int a_total, int b_events, int b_total);

}  // namespace spheret::client
