// The facts of docs/methods.md §2 about the sphere update, for the composite and the fused forms.
#include "worker/nn/sphere_update.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/worker/nn/gradcheck.h"
#include "worker/nn/sphere_fused.h"
#include "worker/nn/sphere_row_math.h"

namespace spheret::nn {
namespace {

using torch::Tensor;
constexpr double kPi = 3.14159265358979323846;

// A named update form: composite (literal formulas) or fused (hand-written backward).
struct Form {
  std::string name;
  Tensor (*update)(const Tensor&, const Tensor&, const Tensor&, const SphereRule&);
};
const Form kForms[] = {{"composite", &SphereUpdateComposite}, {"fused", &SphereUpdateFused}};

SphereRule Rule(Method method, double p = 1.0) { return SphereRule{method, p, kPi / 4}; }

std::vector<SphereRule> AllRules() {
  return {Rule(Method::kGeoNorm),       Rule(Method::kProjSpheret), Rule(Method::kCaySpheret),
          Rule(Method::kPSpheret, 0.5), Rule(Method::kPSpheret, 1), Rule(Method::kPSpheret, 2),
          Rule(Method::kPSpheret, 3.0)};
}

std::string Name(const SphereRule& rule) {
  std::string name(MethodId(rule.method));
  if (rule.method == Method::kPSpheret) name += "(p=" + std::to_string(rule.p).substr(0, 4) + ")";
  return name;
}

Tensor Alpha(double value, torch::ScalarType type = torch::kDouble) {
  return torch::full({}, value, torch::TensorOptions().dtype(type));
}

Tensor RowNorm(const Tensor& x) { return x.norm(2, -1); }

double MaxRelDiff(const Tensor& a, const Tensor& b) {
  return ((a - b).norm(2, -1) / b.norm(2, -1)).max().item<double>();
}

// The tangent part of F, computed here independently of the library.
Tensor Tangent(const Tensor& h, const Tensor& f) {
  return f - ((h * f).sum(-1, true) / (h * h).sum(-1, true)) * h;
}

class SphereUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(1234); }
};

TEST_F(SphereUpdateTest, NormPreservedOverThousandStackedUpdates) {
  for (const Form& form : kForms) {
    for (const SphereRule& rule : AllRules()) {
      for (torch::ScalarType type : {torch::kDouble, torch::kFloat}) {
        Tensor h = torch::randn({4, 8, 64}, torch::TensorOptions().dtype(type)) * 3.0;
        const Tensor radius0 = RowNorm(h);
        for (int layer = 1; layer <= 1000; ++layer) {
          // F with a random scale per layer, so that small, large and capped angles all occur.
          const double scale = std::exp(torch::randn({}).item<double>() * 1.5);
          const Tensor f = torch::randn_like(h) * scale;
          h = form.update(h, f, Alpha(1.0 / std::sqrt(layer), type), rule);
        }
        const double drift = ((RowNorm(h) - radius0).abs() / radius0).max().item<double>();
        const double tolerance = type == torch::kDouble ? 1e-12 : 5e-5;
        std::printf("norm drift after 1000 updates: %-9s %-22s %s %.2e\n", form.name.c_str(),
                    Name(rule).c_str(), type == torch::kDouble ? "fp64" : "fp32", drift);
        EXPECT_LT(drift, tolerance)
            << form.name << " " << Name(rule) << " " << (type == torch::kDouble ? "fp64" : "fp32");
      }
    }
  }
}

TEST_F(SphereUpdateTest, PSpheretOneEqualsProjAndTwoEqualsCay) {
  const Tensor h = torch::randn({16, 32}, torch::kDouble);
  for (double f_scale : {0.1, 1.0, 10.0}) {  // 10.0 drives cay past its angle cap.
    const Tensor f = torch::randn({16, 32}, torch::kDouble) * f_scale;
    const Tensor alpha = Alpha(0.8);
    for (const Form& form : kForms) {
      EXPECT_LT(MaxRelDiff(form.update(h, f, alpha, Rule(Method::kPSpheret, 1.0)),
                           SphereUpdateComposite(h, f, alpha, Rule(Method::kProjSpheret))),
                1e-12)
          << form.name << " scale " << f_scale;
      EXPECT_LT(MaxRelDiff(form.update(h, f, alpha, Rule(Method::kPSpheret, 2.0)),
                           SphereUpdateComposite(h, f, alpha, Rule(Method::kCaySpheret))),
                1e-12)
          << form.name << " scale " << f_scale;
    }
  }
}

TEST_F(SphereUpdateTest, LargePApproachesGeoNormAndSmallPTheIdentity) {
  const Tensor h = torch::randn({16, 32}, torch::kDouble);
  const Tensor f = torch::randn({16, 32}, torch::kDouble) * 2.0;  // Some rows capped.
  const Tensor alpha = Alpha(0.5);
  for (const Form& form : kForms) {
    const Tensor geo = SphereUpdateComposite(h, f, alpha, Rule(Method::kGeoNorm));
    EXPECT_LT(
        (form.update(h, f, alpha, Rule(Method::kPSpheret, 1e6)) - geo).abs().max().item<double>(),
        1e-9)
        << form.name;
    const Tensor tiny = form.update(h, f, alpha, Rule(Method::kPSpheret, 1e-6));
    EXPECT_LT(MaxRelDiff(tiny, h), 1e-5) << form.name;
    EXPECT_GT(MaxRelDiff(tiny, h), 0.0) << form.name;  // It still moves, by about p * pi / 2.
  }
}

TEST_F(SphereUpdateTest, SmallStepRemainderIsThirdOrder) {
  const Tensor h = torch::randn({8, 32}, torch::kDouble);
  const Tensor f = torch::randn({8, 32}, torch::kDouble);
  const Tensor z = Tangent(h, f);
  const Tensor zz_over_hh = (z * z).sum(-1, true) / (h * h).sum(-1, true);
  std::vector<SphereRule> rules = AllRules();
  rules.push_back(Rule(Method::kPSpheret, 10.0));
  double lowest = 1e9, highest = 0;
  for (const Form& form : kForms) {
    for (const SphereRule& rule : rules) {
      auto remainder = [&](double a) {
        const Tensor out = form.update(h, f, Alpha(a), rule);
        return (out - h - a * z + (a * a / 2.0) * zz_over_hh * h).norm().item<double>();
      };
      for (double a : {0.02, 0.01}) {
        const double ratio = remainder(a) / remainder(a / 2);
        lowest = std::min(lowest, ratio);
        highest = std::max(highest, ratio);
        EXPECT_GT(ratio, 7.5) << form.name << " " << Name(rule) << " alpha " << a;
        EXPECT_LT(ratio, 8.5) << form.name << " " << Name(rule) << " alpha " << a;
      }
    }
  }
  std::printf("remainder ratio when alpha halves: %.3f to %.3f\n", lowest, highest);
}

TEST_F(SphereUpdateTest, ParallelFLeavesHUnchangedWithFiniteGradients) {
  for (const Form& form : kForms) {
    for (const SphereRule& rule : AllRules()) {
      for (double factor : {1000.0, -3.0, 0.0}) {
        const Tensor h = torch::randn({6, 16}, torch::kDouble).requires_grad_();
        const Tensor f = (h.detach() * factor).requires_grad_();
        const Tensor alpha = Alpha(0.7).requires_grad_();
        const Tensor out = form.update(h, f, alpha, rule);
        EXPECT_LT(MaxRelDiff(out.detach(), h.detach()), 1e-10)
            << form.name << " " << Name(rule) << " F = " << factor << " h";
        (out * torch::randn_like(out)).sum().backward();
        for (const Tensor& t : {h, f, alpha}) {
          EXPECT_TRUE(torch::isfinite(t.grad()).all().item<bool>())
              << form.name << " " << Name(rule) << " F = " << factor << " h";
        }
      }
    }
  }
}

TEST_F(SphereUpdateTest, FusedMatchesCompositeInForwardAndGradients) {
  for (const SphereRule& rule : AllRules()) {
    for (torch::ScalarType type : {torch::kDouble, torch::kFloat}) {
      for (double f_scale : {0.05, 1.0, 20.0}) {
        const auto options = torch::TensorOptions().dtype(type);
        const Tensor h0 = torch::randn({3, 5, 48}, options) * 2.0;
        const Tensor f0 = torch::randn({3, 5, 48}, options) * f_scale;
        const Tensor w = torch::randn({3, 5, 48}, options);
        Tensor grads[2][3];
        Tensor outs[2];
        for (int k = 0; k < 2; ++k) {
          const Tensor h = h0.clone().requires_grad_(), f = f0.clone().requires_grad_();
          const Tensor alpha = Alpha(0.6, type).requires_grad_();
          outs[k] = kForms[k].update(h, f, alpha, rule);
          (outs[k] * w).sum().backward();
          grads[k][0] = h.grad(), grads[k][1] = f.grad(), grads[k][2] = alpha.grad();
        }
        const double tol = type == torch::kDouble ? 1e-10 : 2e-4;
        const std::string what = Name(rule) + " scale " + std::to_string(f_scale) +
                                 (type == torch::kDouble ? " fp64" : " fp32");
        EXPECT_TRUE(torch::allclose(outs[1], outs[0], tol, tol)) << "forward " << what;
        for (int i = 0; i < 3; ++i) {
          EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i], tol, tol))
              << "gradient " << i << " " << what << ": max diff "
              << (grads[1][i] - grads[0][i]).abs().max().item<double>();
        }
      }
    }
  }
}

TEST_F(SphereUpdateTest, GradcheckFusedAndCompositeInDoublePrecision) {
  for (const Form& form : kForms) {
    for (const SphereRule& rule : AllRules()) {
      for (double f_scale : {0.3, 5.0}) {  // Below and (for capped rules) past the cap.
        const Tensor h = (torch::randn({2, 3, 6}, torch::kDouble) * 1.5).requires_grad_();
        const Tensor f = (torch::randn({2, 3, 6}, torch::kDouble) * f_scale).requires_grad_();
        const Tensor alpha = Alpha(0.45).requires_grad_();
        EXPECT_TRUE(
            testing::GradCheck([&] { return form.update(h, f, alpha, rule); }, {h, f, alpha}))
            << form.name << " " << Name(rule) << " scale " << f_scale;
      }
    }
  }
}

TEST_F(SphereUpdateTest, ReducedPrecisionInputsUseFp32Math) {
  const Tensor h = torch::randn({4, 64}).to(torch::kBFloat16);
  const Tensor f = torch::randn({4, 64}).to(torch::kBFloat16);
  for (const Form& form : kForms) {
    const Tensor out = form.update(h, f, Alpha(0.5, torch::kFloat), Rule(Method::kGeoNorm));
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
    const Tensor expected = SphereUpdateComposite(h.to(torch::kFloat), f.to(torch::kFloat),
                                                  Alpha(0.5, torch::kFloat), Rule(Method::kGeoNorm))
                                .to(torch::kBFloat16);
    EXPECT_TRUE(torch::equal(out, expected)) << form.name;
    // An fp32 residual stream with a bf16 sublayer output stays fp32.
    EXPECT_EQ(form.update(h.to(torch::kFloat), f, Alpha(0.5, torch::kFloat), Rule(Method::kGeoNorm))
                  .scalar_type(),
              torch::kFloat);
  }
}

TEST_F(SphereUpdateTest, AngleCapBoundsTheRotation) {
  const Tensor h = torch::randn({32, 16}, torch::kDouble);
  const Tensor f = torch::randn({32, 16}, torch::kDouble) * 100.0;
  for (const SphereRule& rule :
       {Rule(Method::kGeoNorm), Rule(Method::kCaySpheret), Rule(Method::kPSpheret, 3.0)}) {
    const Tensor out = SphereUpdateFused(h, f, Alpha(1.0), rule);
    const Tensor cosine = (out * h).sum(-1) / (RowNorm(out) * RowNorm(h));
    const Tensor angle = torch::acos(cosine.clamp(-1, 1));
    EXPECT_NEAR(angle.max().item<double>(), kPi / 4, 1e-6) << Name(rule);
    EXPECT_LT(angle.max().item<double>(), kPi / 4 + 1e-9) << Name(rule);
  }
  // Proj-SpheretNorm has no cap, and its angle is atan(beta) < pi/2.
  const Tensor out = SphereUpdateFused(h, f, Alpha(1.0), Rule(Method::kProjSpheret));
  const Tensor angle = torch::acos(((out * h).sum(-1) / (RowNorm(out) * RowNorm(h))).clamp(-1, 1));
  EXPECT_GT(angle.max().item<double>(), 1.4);
  EXPECT_LT(angle.max().item<double>(), kPi / 2);
}

TEST_F(SphereUpdateTest, MeasuredAngleMatchesTheUpdate) {
  const Tensor h = torch::randn({10, 16}, torch::kDouble);
  const Tensor f = torch::randn({10, 16}, torch::kDouble);
  for (const SphereRule& rule : AllRules()) {
    const Tensor out = SphereUpdateFused(h, f, Alpha(0.3), rule);
    const SphereGeometry geometry = MeasureSphereUpdate(h, f, Alpha(0.3), rule);
    const Tensor angle =
        torch::acos(((out * h).sum(-1) / (RowNorm(out) * RowNorm(h))).clamp(-1, 1));
    EXPECT_TRUE(torch::allclose(geometry.theta, angle, 1e-6, 1e-7)) << Name(rule);
    EXPECT_TRUE(torch::allclose(geometry.hidden_norm, RowNorm(h))) << Name(rule);
    const Tensor radial = (h * f).sum(-1).abs() / (RowNorm(h) * RowNorm(f));
    EXPECT_TRUE(torch::allclose(geometry.radial, radial)) << Name(rule);
  }
}

// The row kernels' closed forms for an integer p (no atan, sin, cos: p = 1 and 2 by their own
// formulas, 3 to 8 by complex powers) against sin and cos of p atan(x) in fp64, over x from 1e-30 to
// 1e30, in fp32 and fp64, within `tol` per complex product; and the cap decided on x alone.
template <typename T>
void ExpectClosedFormsMatchTrig(double tol_per_product) {
  for (double p : {1.0, 2.0, 3.0, 4.0, 5.0, 8.0}) {
    EXPECT_EQ(row::IntegerP(row::MakeRule(p, false, 1e300)), static_cast<int>(p));
    const double tol = tol_per_product * p;
    const row::Rule rule = row::MakeRule(p, /*exp_map=*/false, 1e300);
    for (double x = 1e-30; x < 1e31; x *= 1.7) {
      const T hh = T(1), alpha = T(1), zz = T(x * p) * T(x * p);  // beta = alpha ||z|| / ||h||
      const row::Forward<T> fw = row::SolveForward(hh, zz, alpha, rule);
      const double theta = p * std::atan(static_cast<double>(fw.beta) / p);
      EXPECT_NEAR(fw.sin_t, std::sin(theta), tol) << "p " << p << " x " << x;
      EXPECT_NEAR(fw.c, std::cos(theta), tol) << "p " << p << " x " << x;
      EXPECT_TRUE(std::isfinite(fw.s) && std::isfinite(fw.dtheta)) << "p " << p << " x " << x;
    }
  }
  const double tol = tol_per_product;
  // Cay with the cap at pi/4: theta = 2 atan(x) passes it at x = tan(pi/8).
  const row::Rule capped = row::MakeRule(2.0, false, kPi / 4);
  for (double x : {0.3, 0.41, 0.42, 5.0, 1e20}) {
    const row::Forward<T> fw = row::SolveForward(T(1), T(4 * x * x), T(1), capped);
    const bool past = 2 * std::atan(x) > kPi / 4;
    EXPECT_EQ(fw.dtheta == T(0), past) << "x " << x;
    const double theta = std::min(2 * std::atan(x), kPi / 4);
    EXPECT_NEAR(fw.sin_t, std::sin(theta), tol) << "x " << x;
    EXPECT_NEAR(fw.c, std::cos(theta), tol) << "x " << x;
  }
  const row::Forward<T> nan =
      row::SolveForward(T(1), T(1), T(NAN), row::MakeRule(1.0, false, 1e300));
  EXPECT_TRUE(std::isnan(nan.s)) << "a NaN stays a NaN";
}

TEST_F(SphereUpdateTest, RowClosedFormsForIntegerPMatchTrigEverywhere) {
  for (double p : {0.5, 2.5, 9.0}) EXPECT_EQ(row::IntegerP(row::MakeRule(p, false, 1e300)), 0) << p;
  EXPECT_EQ(row::IntegerP(row::MakeRule(1e300, true, 1e300)), 0) << "geonorm: the exponential map";
  ExpectClosedFormsMatchTrig<double>(1e-15);
  ExpectClosedFormsMatchTrig<float>(3e-7);
}

}  // namespace
}  // namespace spheret::nn
