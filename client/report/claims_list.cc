// The paper's claims as data, and the verdict rule (claims.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/claims.h"
#include "config/method_registry.h"

namespace spheret::client {
namespace {

// The significance level of the count tests: a 95% two-sided test, as the t intervals.
constexpr double kAlpha = 1 - kConfidence;

RowRole Role(std::string name, std::set<std::string> methods, AngleCap angle_max = AngleCap::kAny,
             std::optional<bool> scalenorm = std::nullopt) {
  RowRole role;
  role.name = std::move(name);
  role.methods = std::move(methods);
  role.angle_max = angle_max;
  role.scalenorm = scalenorm;
  return role;
}

// A role of the cap claims: rows of a method that the cap acts on.
RowRole CapRole(std::string name, AngleCap angle_max) {
  RowRole role = Role(std::move(name), {}, angle_max);
  role.capped_method = true;
  return role;
}

// "All three types of SpheretNorm" (§4.2).
std::set<std::string> SpheretNormMethods() {
  return MethodIdSet({Method::kPSpheret, Method::kProjSpheret, Method::kCaySpheret});
}

// A role of one method, named as the paper names it ("Pre-LN").
RowRole MethodRole(Method method) {
  return Role(std::string(SpecOf(method).label), MethodIdSet({method}));
}

// The rows the universal claim tests against: "Pre-LN or Keel".
RowRole PreLnOrKeel() {
  return Role(
      std::string(SpecOf(Method::kPreLn).label) + " or " + std::string(SpecOf(Method::kKeel).label),
      MethodIdSet({Method::kPreLn, Method::kKeel}));
}

Claim MeanClaim(std::string id, std::string words, std::string section, RowRole a, RowRole b) {
  Claim claim;
  claim.id = std::move(id);
  claim.words = std::move(words);
  claim.section = std::move(section);
  claim.a = std::move(a);
  claim.b = std::move(b);
  return claim;
}

Claim Matched(Claim claim, std::set<std::string> varied) {
  claim.pairing = Pairing::kMatched;
  claim.varied = std::move(varied);
  return claim;
}

Claim WithMetric(Claim claim, ClaimMetric metric) {
  claim.metric = metric;
  return claim;
}

// The paper's words on the uncapped update, and what a claim of them measures.
std::string Unstable(const std::string& measured) {
  return "\"unstable without a cap\" (" + measured + ")";
}

// The claims that compare methods: SpheretNorm against each baseline (Tables 2–3), and the best
// finite p against GeoNorm.
std::vector<Claim> MethodClaims() {
  const RowRole pre_ln = MethodRole(Method::kPreLn);
  const RowRole baselines = Role(
      "baseline", MethodIdSet({Method::kPreDyt, Method::kPeriLn, Method::kKeel, Method::kGeoNorm}));
  const RowRole geonorm = MethodRole(Method::kGeoNorm);
  const RowRole spheretnorm = Role("SpheretNorm", SpheretNormMethods());
  std::vector<Claim> claims = {
      MeanClaim("spheretnorm_vs_pre_ln",
                "Paraphrased: the SpheretNorm variants reach a lower validation loss than Pre-LN.",
                "Tables 2–3", spheretnorm, pre_ln),
      MeanClaim("spheretnorm_vs_baselines",
                "Paraphrased: the SpheretNorm variants reach a lower validation loss than each "
                "baseline (Pre-DyT, Peri-LN, Keel, GeoNorm).",
                "Tables 2–3", spheretnorm, baselines),
      Matched(MeanClaim("spheretnorm_vs_geonorm_matched",
                        "Paraphrased: SpheretNorm reaches a lower validation loss than GeoNorm, "
                        "here with ScaleNorm and every other knob equal (the paper gives ScaleNorm "
                        "to SpheretNorm only, §4.2).",
                        "Tables 2–3", spheretnorm, geonorm),
              {"method", "p"}),
      MeanClaim("best_at_finite_p",
                "Paraphrased: the best validation loss is reached at a finite p (the best "
                "p-SpheretNorm row), not at GeoNorm (p → ∞).",
                "–", Role("best finite p", SpheretNormMethods()), geonorm),
  };
  claims.back().best_of_a = true;
  return claims;
}

// §4.2's claims on the angle cap and the first-layer ScaleNorm, each between rows equal in every
// other knob.
std::vector<Claim> CapAndScaleNormClaims() {
  const RowRole capped = CapRole("capped", AngleCap::kFinite);
  const RowRole uncapped = CapRole("uncapped", AngleCap::kNone);
  return {
      Matched(WithMetric(
                  MeanClaim("cap_divergences", Unstable("divergences"), "§4.2", capped, uncapped),
                  ClaimMetric::kDivergences),
              {"angle_max"}),
      Matched(WithMetric(
                  MeanClaim("cap_loss_spikes", Unstable("loss spikes"), "§4.2", capped, uncapped),
                  ClaimMetric::kLossSpikes),
              {"angle_max"}),
      Matched(
          MeanClaim("cap_final_loss", Unstable("final validation loss"), "§4.2", capped, uncapped),
          {"angle_max"}),
      Matched(MeanClaim("cap_quarter_vs_half_pi", "\"(0, π/4] … better than (0, π/2)\"", "§4.2",
                        CapRole("θmax = π/4", AngleCap::kQuarterPi),
                        CapRole("θmax = π/2", AngleCap::kHalfPi)),
              {"angle_max"}),
      Matched(WithMetric(MeanClaim("scalenorm_accelerates",
                                   "Paraphrased: the first-layer ScaleNorm accelerates "
                                   "convergence.",
                                   "§4.2", Role("ScaleNorm on", {}, AngleCap::kAny, true),
                                   Role("ScaleNorm off", {}, AngleCap::kAny, false)),
                         ClaimMetric::kStepsToLoss),
              {"scalenorm"}),
  };
}

std::vector<Claim> BuildClaims() {
  std::vector<Claim> claims = MethodClaims();
  for (Claim& claim : CapAndScaleNormClaims()) claims.push_back(std::move(claim));
  Claim converges =
      WithMetric(MeanClaim("converges_where_pre_ln_or_keel_diverge",
                           "\"converging in every setting in which Pre-LN or Keel diverges\"", "–",
                           Role("SpheretNorm", SpheretNormMethods()), PreLnOrKeel()),
                 ClaimMetric::kDivergences);
  converges.universal = true;
  claims.push_back(std::move(converges));
  return claims;
}

// Mean tests: the side of 0 the interval lies on.
void DecideMean(ClaimComparison* c) {
  const Difference& d = c->difference;
  if (c->a_values.size() < 2 || c->b_values.size() < 2) {
    c->reason = "fewer than 2 counted seeds in a row";
    return;
  }
  if (!(d.ci_high > d.ci_low)) {  // also NaN: no spread in either row (Welch)
    c->reason = "the differences have no spread (" + FormatNumber(d.mean, 4) +
                "): a t interval of no width is no evidence";
    return;
  }
  const bool below = d.ci_high < 0;
  const bool above = d.ci_low > 0;
  if (!below && !above) {
    c->reason = "the 95% interval of A − B includes 0";
    return;
  }
  const bool as_stated = c->claim->a_lower ? below : above;
  c->verdict = as_stated ? Verdict::kSupported : Verdict::kContradicted;
  c->reason = absl::StrCat("the 95% interval of A − B lies ", below ? "below" : "above", " 0");
}

void DecideCounts(ClaimComparison* c) {
  const int n_a = static_cast<int>(c->a_values.size());
  const int n_b = static_cast<int>(c->b_values.size());
  const std::string p = absl::StrFormat("Fisher's p = %.3g", c->fisher_p);
  if (n_a == 0 || n_b == 0) {
    c->reason = "a row has no SUCCEEDED or DIVERGED trial";
    return;
  }
  if (c->claim->universal) {
    if (c->diverged_b == 0) {
      c->reason = "not tested here: B did not diverge";
    } else if (c->diverged_a > 0) {
      c->verdict = Verdict::kContradicted;
      c->reason = "A diverged where B diverged";
    } else if (c->fisher_p < kAlpha) {
      c->verdict = Verdict::kSupported;
      c->reason = "A never diverged where B did; " + p + " < 0.05";
    } else {
      c->reason = "A never diverged where B did, but " + p + " ≥ 0.05 at this n";
    }
    return;
  }
  if (c->fisher_p >= kAlpha) {
    c->reason = p + " ≥ 0.05";
    return;
  }
  const bool a_fewer = c->mean_a < c->mean_b;
  c->verdict = a_fewer == c->claim->a_lower ? Verdict::kSupported : Verdict::kContradicted;
  c->reason = absl::StrCat(p, " < 0.05; A diverged ", a_fewer ? "less" : "more", " often");
}

}  // namespace

const std::vector<Claim>& PaperClaims() {
  static const std::vector<Claim> claims = BuildClaims();
  return claims;
}

std::string VerdictText(Verdict verdict) {
  switch (verdict) {
    case Verdict::kSupported:
      return "supported";
    case Verdict::kContradicted:
      return "contradicted";
    default:
      return "inconclusive";
  }
}

std::vector<std::string> VerdictRule() {
  return {
      "Means (final val loss, loss spikes, steps to reach a loss): supported when the 95% t "
      "interval of A − B lies wholly on the side the paper states, contradicted when it lies "
      "wholly on the other side, inconclusive when it includes 0, when a row has fewer than 2 "
      "counted seeds, or when the interval has no width (every paired difference equal, e.g. "
      "steps on a coarse eval grid).",
      "Divergences: Fisher's exact two-sided p over DIVERGED among SUCCEEDED + DIVERGED trials; "
      "supported when p < 0.05 and A diverges less often as stated, contradicted when p < 0.05 "
      "the other way, inconclusive otherwise.",
      "\"In every setting\": tested only where B diverged at least once (else inconclusive); "
      "contradicted when A diverged there, supported when A never did and Fisher's p < 0.05, "
      "inconclusive otherwise.",
      "Confounds: any comparison whose rows also differ in a config key beyond the claim's own "
      "(method, p, seed, the keys it varies) is inconclusive, except scalenorm at the paper's "
      "settings (§4.2 ties it to the method), which is listed only.",
      "Each comparison stands alone at 95% (no correction for multiple comparisons); "
      "best_at_finite_p picks its A row as the lowest mean of the column's finite-p rows, so "
      "its \"supported\" is optimistic.",
  };
}

void Decide(ClaimComparison* c) {
  c->verdict = Verdict::kInconclusive;
  if (c->claim->metric == ClaimMetric::kDivergences) {
    DecideCounts(c);
  } else {
    DecideMean(c);
  }
  if (!c->disallowed.empty()) {
    c->verdict = Verdict::kInconclusive;
    std::string keys;
    for (const std::string& key : c->disallowed)
      absl::StrAppend(&keys, keys.empty() ? "" : ", ", key);
    c->reason = absl::StrCat("confounded by ", keys, " (", c->reason, ")");
  }
}

}  // namespace spheret::client
