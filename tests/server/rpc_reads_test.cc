// The read API under big sweeps and changing tokens: lists page and leave sweep files out, a file
// is capped at submit and fetched on its own, and a revoked or expired token ends its calls (a
// WatchSweep stream included).
#include "spheret/v1/admin.grpc.pb.h"
#include "tests/server/rpc_fixture.h"

namespace spheret {
namespace {

// A valid sweep file of about `bytes` bytes, most of it comments.
std::string PaddedSweep(const std::string& name, size_t bytes) {
  std::string yaml = "name: " + name + "\ndataset: d\nparameters: {method: {values: [pre_ln]}}\n";
  const std::string comment = "# " + std::string(97, 'x') + "\n";
  while (yaml.size() + comment.size() <= bytes) yaml += comment;
  return yaml;
}

grpc::Status GetSweep(v1::SweepService::Stub& sweeps, int64_t sweep_id, bool include_spec,
                      v1::Sweep* sweep) {
  grpc::ClientContext context;
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  request.set_include_spec(include_spec);
  return sweeps.GetSweep(&context, request, sweep);
}

// Issue 28, item 6: every ListSweeps answer carried each sweep's file, so five 0.9 MB files made
// the list exceed the client's 4 MiB message limit for every reader ("message larger than max").
TEST_F(RpcTest, BigSweepFilesStayOutOfListsAndAreCapped) {
  std::vector<std::string> files;
  for (int i = 0; i < 5; ++i) {
    files.push_back(PaddedSweep("big-" + std::to_string(i), 900'000));
    Submit(files.back());
  }
  grpc::ClientContext context;
  v1::ListSweepsRequest request;
  request.set_page_size(1000);
  v1::ListSweepsResponse listed;
  grpc::Status status = sweeps_->ListSweeps(&context, request, &listed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(listed.sweeps_size(), 5);
  EXPECT_LT(listed.ByteSizeLong(), 4096u);
  for (const v1::Sweep& sweep : listed.sweeps()) EXPECT_EQ(sweep.spec_yaml(), "");

  v1::Sweep plain, with_spec;
  ASSERT_TRUE(GetSweep(*sweeps_, 3, /*include_spec=*/false, &plain).ok());
  EXPECT_EQ(plain.name(), "big-2");
  EXPECT_EQ(plain.spec_yaml(), "");
  ASSERT_TRUE(GetSweep(*sweeps_, 3, /*include_spec=*/true, &with_spec).ok());
  EXPECT_EQ(with_spec.spec_yaml(), files[2]);

  grpc::ClientContext big_context;
  v1::SubmitSweepRequest big;
  big.set_spec_yaml(PaddedSweep("too-big", (1 << 20) + 100));
  v1::SubmitSweepResponse response;
  status = sweeps_->SubmitSweep(&big_context, big, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "sweep file: " + std::to_string(big.spec_yaml().size()) +
                " bytes, above the limit of 1048576 (it is stored whole): drop comments or split "
                "the sweep");
}

// Issue 28, item 6: QueryResults answered with every row of a sweep in one message.
TEST_F(RpcTest, ResultsComeInPages) {
  const int64_t sweep = Submit().sweep_id();  // 4 trials
  std::vector<int> page_sizes;
  std::vector<int64_t> seen;
  int64_t token = 0;
  do {
    grpc::ClientContext context;
    v1::QueryResultsRequest request;
    request.set_sweep_id(sweep);
    request.set_page_size(3);
    request.set_page_token(token);
    v1::QueryResultsResponse page;
    ASSERT_TRUE(sweeps_->QueryResults(&context, request, &page).ok());
    page_sizes.push_back(page.rows_size());
    for (const v1::ResultRow& row : page.rows()) seen.push_back(row.trial_id());
    token = page.next_page_token();
  } while (token != 0);
  EXPECT_EQ(page_sizes, (std::vector<int>{3, 1}));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4}));
}

// Issue 28: a revoked token kept its open WatchSweep stream for as long as the sweep lasted.
TEST_F(RpcTest, RevokingATokenEndsItsWatch) {
  Stop();
  Start(/*require_tokens=*/true);
  absl::StatusOr<NewToken> token = coordinator_->tokens().Create(Role::kRead, "watcher", "");
  ASSERT_TRUE(token.ok()) << token.status();
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("admin-token"), "admin", Role::kAdmin, "", 1).ok());
  grpc::ClientContext submit_context;
  submit_context.AddMetadata("authorization", "Bearer admin-token");
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(kSweep);
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(sweeps_->SubmitSweep(&submit_context, submit, &submitted).ok());

  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + token->token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::WatchSweepRequest request;
  request.set_sweep_id(submitted.sweep_id());
  auto reader = sweeps_->WatchSweep(&context, request);
  v1::WatchSweepEvent event;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(reader->Read(&event)) << "trial " << i;
  ASSERT_TRUE(coordinator_->tokens().Revoke("watcher").ok());
  const auto revoked = std::chrono::steady_clock::now();
  EXPECT_FALSE(reader->Read(&event)) << "the sweep is still active: only the revocation ends it";
  grpc::Status status = reader->Finish();
  EXPECT_LT(std::chrono::steady_clock::now() - revoked, std::chrono::seconds(5));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  EXPECT_EQ(status.error_message(), "unknown token");
}

// The admin's token lists (of the admin token and one that expires at `expires_ms`) show when
// each expires (0: never), a page at a time.
void ExpectListsShowExpiry(v1::TokenService::Stub& tokens, int64_t expires_ms) {
  grpc::ClientContext list_context;
  list_context.AddMetadata("authorization", "Bearer admin-token");
  v1::ListTokensResponse listed;
  ASSERT_TRUE(tokens.ListTokens(&list_context, v1::ListTokensRequest(), &listed).ok());
  ASSERT_EQ(listed.tokens_size(), 2);
  EXPECT_EQ(listed.tokens(0).expires_ms(), 0) << "the admin token never expires";
  EXPECT_EQ(listed.tokens(1).expires_ms(), expires_ms);
  EXPECT_EQ(listed.next_page_token(), 0);
  grpc::ClientContext page_context;
  page_context.AddMetadata("authorization", "Bearer admin-token");
  v1::ListTokensRequest first_page;
  first_page.set_page_size(1);
  v1::ListTokensResponse page;
  ASSERT_TRUE(tokens.ListTokens(&page_context, first_page, &page).ok());
  ASSERT_EQ(page.tokens_size(), 1);
  EXPECT_EQ(page.tokens(0).name(), "admin");
  EXPECT_EQ(page.next_page_token(), page.tokens(0).token_id());
}

// Issue 28: tokens never expired. One made with a lifetime is refused from its expiry on (a
// watch it holds ends as a revoked one does), and lists show when.
TEST_F(RpcTest, TokensWithATtlExpire) {
  Stop();
  Start(/*require_tokens=*/true);
  auto tokens = v1::TokenService::NewStub(channel_);
  ASSERT_TRUE(store_->CreateToken(Sha256Hex("admin-token"), "admin", Role::kAdmin, "", 1).ok());
  grpc::ClientContext create_context;
  create_context.AddMetadata("authorization", "Bearer admin-token");
  v1::CreateTokenRequest create;
  create.set_role("read");
  create.set_name("hourly");
  create.set_ttl_s(3600);
  v1::CreateTokenResponse created;
  ASSERT_TRUE(tokens->CreateToken(&create_context, create, &created).ok());
  EXPECT_EQ(created.expires_ms(), clock_.NowMs() + 3'600'000);
  const auto list_sweeps = [&]() {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + created.token());
    v1::ListSweepsResponse response;
    return sweeps_->ListSweeps(&context, v1::ListSweepsRequest(), &response);
  };
  EXPECT_TRUE(list_sweeps().ok());
  clock_.AdvanceMs(3'599'999);
  EXPECT_TRUE(list_sweeps().ok());
  clock_.AdvanceMs(1);
  grpc::Status expired = list_sweeps();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(expired.error_message().find("the token expired at "), std::string::npos)
      << expired.error_message();

  ExpectListsShowExpiry(*tokens, created.expires_ms());

  grpc::ClientContext bad_context;
  bad_context.AddMetadata("authorization", "Bearer admin-token");
  create.set_ttl_s(-5);
  grpc::Status negative = tokens->CreateToken(&bad_context, create, &created);
  EXPECT_EQ(negative.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(negative.error_message().find("ttl: -5 s is out of range"), std::string::npos);
}

// StreamCurves sends the curve of the asked metric of each trial that has one (in id order, with
// its config and state), and nothing of trials without it; an unknown sweep is NOT_FOUND.
TEST_F(RpcTest, CurvesStreamBackPerTrialWithTheirConfigs) {
  const int64_t sweep = Submit().sweep_id();  // 4 trials
  ASSERT_TRUE(Register("a", 1).ok());
  const std::vector<v1::Lease> leases = Acquire("a");
  ASSERT_EQ(leases.size(), 1u);
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(leases[0].trial_id(), 1, 0, 4, &reported).ok());
  grpc::ClientContext context;
  v1::StreamCurvesRequest request;
  request.set_sweep_id(sweep);
  request.set_metric("train/loss");
  auto reader = sweeps_->StreamCurves(&context, request);
  std::vector<v1::Curve> curves;
  for (v1::Curve curve; reader->Read(&curve);) curves.push_back(curve);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(curves.size(), 1u) << "only the trial with train/loss rows has a curve";
  EXPECT_EQ(curves[0].trial_id(), leases[0].trial_id());
  EXPECT_EQ(curves[0].config_json(), leases[0].config_json());
  EXPECT_EQ(curves[0].state(), v1::TRIAL_STATE_RUNNING);
  EXPECT_EQ(std::vector<int64_t>(curves[0].steps().begin(), curves[0].steps().end()),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_DOUBLE_EQ(curves[0].values(3), 5.0 - 0.03);

  grpc::ClientContext unknown_context;
  request.set_sweep_id(sweep + 100);
  auto unknown = sweeps_->StreamCurves(&unknown_context, request);
  v1::Curve none;
  EXPECT_FALSE(unknown->Read(&none));
  EXPECT_EQ(unknown->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// max_points downsamples a curve for a figure (server/curve_downsample.h); without it, or when the
// curve is short enough, every point comes back; Curve.points is the count before; max_points 1
// to 4 is INVALID_ARGUMENT.
TEST_F(RpcTest, CurvesDownsampleOnlyWhenAskedAndLonger) {
  const int64_t sweep = Submit().sweep_id();
  ASSERT_TRUE(Register("a", 1).ok());
  const std::vector<v1::Lease> leases = Acquire("a");
  ASSERT_EQ(leases.size(), 1u);
  v1::IngestEventsResponse reported;
  ASSERT_TRUE(SendEvents(leases[0].trial_id(), 1, 0, 200, &reported).ok());  // 5 - 0.01 step
  const auto read = [&](int64_t max_points, grpc::Status* status) {
    grpc::ClientContext context;
    v1::StreamCurvesRequest request;
    request.set_sweep_id(sweep);
    request.set_metric("train/loss");
    if (max_points >= 0) request.set_max_points(max_points);
    auto reader = sweeps_->StreamCurves(&context, request);
    std::vector<v1::Curve> curves;
    for (v1::Curve curve; reader->Read(&curve);) curves.push_back(curve);
    *status = reader->Finish();
    return curves;
  };
  grpc::Status status;
  for (int64_t exact : {-1, 0, 200, 4000}) {  // -1: the field left unset
    const std::vector<v1::Curve> curves = read(exact, &status);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(curves.size(), 1u);
    EXPECT_EQ(curves[0].steps_size(), 200) << exact;
    EXPECT_EQ(curves[0].points(), 200);
    EXPECT_DOUBLE_EQ(curves[0].values(199), 5.0 - 0.01 * 199);
  }
  // 4 buckets of 50 steps; a falling line's maximum is each bucket's first, its minimum the last.
  const std::vector<v1::Curve> figure = read(20, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(figure.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>(figure[0].steps().begin(), figure[0].steps().end()),
            (std::vector<int64_t>{0, 49, 50, 99, 100, 149, 150, 199}));
  EXPECT_EQ(figure[0].points(), 200);
  EXPECT_DOUBLE_EQ(figure[0].values(1), 5.0 - 0.01 * 49);
  read(4, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("max_points must be 0"), std::string::npos);
}

}  // namespace
}  // namespace spheret
