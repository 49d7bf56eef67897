// The CLI and the coordinator over TLS: each connection failure names its real cause (nothing
// listening, a TLS handshake the coordinator refused, a refused token), and the coordinator names
// a bad certificate or key file instead of failing to listen.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

class CliTlsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spheret_cli_tls_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    p_ = dir_.string() + "/";
    const std::string script =
        "set -e; cd " + p_ +
        "\nopenssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=spheret-test-ca\n"
        "for who in server client; do\n"
        "  openssl req -newkey rsa:2048 -nodes -keyout $who.key -out $who.csr -subj /CN=$who\n"
        "  echo 'subjectAltName=IP:127.0.0.1,DNS:localhost' > $who.ext\n"
        "  openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile $who.ext -out $who.pem\n"
        "done\n"
        "echo 'not a certificate' > junk.pem\n";
    std::ofstream(dir_ / "make.sh") << script;
    ASSERT_EQ(std::system(("bash " + p_ + "make.sh > " + p_ + "make.log 2>&1").c_str()), 0)
        << ReadFile(dir_ / "make.log");
  }
  void TearDown() override {
    coordinator_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  std::vector<std::string> CoordinatorArgv(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {
        SPHERET_COORDINATOR_PATH, "--db", p_ + "spheret.db", "--listen", "127.0.0.1:0",
        "--metrics-listen",       ""};
    argv.insert(argv.end(), flags.begin(), flags.end());
    coordinator_.reset();
    fs::remove(p_ + "coordinator.out");  // FirstLine must not read a former run's line
    fs::remove(p_ + "coordinator.err");
    return argv;
  }

  // Runs the coordinator with `flags` on 127.0.0.1:0; returns its first stdout line.
  std::string StartCoordinator(const std::vector<std::string>& flags) {
    coordinator_ = std::make_unique<ChildProcess>(CoordinatorArgv(flags), p_ + "coordinator.out",
                                                  p_ + "coordinator.err");
    return coordinator_->FirstLine(10'000);
  }

  // Runs the coordinator with `flags` to its end (exit code 1, nothing on stdout); returns its
  // stderr.
  std::string FailingCoordinator(const std::vector<std::string>& flags) {
    ChildProcess coordinator(CoordinatorArgv(flags), p_ + "coordinator.out",
                             p_ + "coordinator.err");
    const int status = coordinator.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
    EXPECT_EQ(ReadFile(p_ + "coordinator.out"), "") << "it must not listen";
    return ReadFile(p_ + "coordinator.err");
  }

  CliResult Cli(const std::string& address, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {SPHERET_CLI_PATH, "--coordinator", address, "--timeout", "10"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("sweeps");
    fs::remove(p_ + "cli.err");
    ChildProcess cli(argv, p_ + "cli.out", p_ + "cli.err");
    const int status = cli.Wait();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(p_ + "cli.out"),
            ReadFile(p_ + "cli.err")};
  }

  fs::path dir_;
  std::string p_;
  std::unique_ptr<ChildProcess> coordinator_;
};

// Issue 28, item 12: a non-PEM certificate and a key of another pair both said "cannot listen on
// 127.0.0.1:0 (address in use or not local?)".
TEST_F(CliTlsTest, CoordinatorNamesABadCertificateOrKey) {
  const std::string junk =
      FailingCoordinator({"--tls-cert", p_ + "junk.pem", "--tls-key", p_ + "server.key"});
  EXPECT_NE(junk.find("--tls-cert " + p_ + "junk.pem: not a PEM certificate"), std::string::npos)
      << junk;
  EXPECT_EQ(junk.find("cannot listen"), std::string::npos) << junk;
  const std::string mismatched =
      FailingCoordinator({"--tls-cert", p_ + "server.pem", "--tls-key", p_ + "client.key"});
  EXPECT_NE(mismatched.find("--tls-key " + p_ + "client.key is not the private key of --tls-cert " +
                            p_ + "server.pem"),
            std::string::npos)
      << mismatched;
  const std::string not_a_key =
      FailingCoordinator({"--tls-cert", p_ + "server.pem", "--tls-key", p_ + "junk.pem"});
  EXPECT_NE(not_a_key.find("--tls-key " + p_ + "junk.pem: not a PEM private key"),
            std::string::npos)
      << not_a_key;
}

// Issue 28, item 12: mTLS without a client certificate, and plaintext to a TLS coordinator, both
// said "is spheret-coordinator running there?".
TEST_F(CliTlsTest, ConnectionErrorsNameTheirCause) {
  ChildProcess create({SPHERET_COORDINATOR_PATH, "--db", p_ + "spheret.db", "--create-token",
                       "admin", "--token-name", "admin"},
                      p_ + "token.out", p_ + "token.err");
  ASSERT_EQ(create.Wait(), 0) << ReadFile(p_ + "token.err");
  const std::string token = create.FirstLine();
  const std::string line =
      StartCoordinator({"--tls-cert", p_ + "server.pem", "--tls-key", p_ + "server.key",
                        "--tls-client-ca", p_ + "ca.pem", "--require-tokens"});
  int port = 0;
  ASSERT_EQ(std::sscanf(line.c_str(), "listening %d", &port), 1)
      << line << ReadFile(p_ + "coordinator.err");
  const std::string address = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> mtls = {"--tls-ca",        p_ + "ca.pem", "--tls-cert",
                                         p_ + "client.pem", "--tls-key",   p_ + "client.key"};
  std::vector<std::string> with_token = mtls;
  with_token.insert(with_token.end(), {"--token", token});
  const CliResult ok = Cli(address, with_token);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;

  const CliResult plain = Cli(address, {"--token", token});
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_NE(plain.err.find("may require TLS"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("is spheret-coordinator running there"), std::string::npos) << plain.err;

  const CliResult no_cert = Cli(address, {"--tls-ca", p_ + "ca.pem", "--token", token});
  EXPECT_EQ(no_cert.exit_code, 1);
  EXPECT_NE(no_cert.err.find("TLS handshake"), std::string::npos) << no_cert.err;
  EXPECT_NE(no_cert.err.find("client certificate"), std::string::npos) << no_cert.err;

  std::vector<std::string> bad_token = mtls;
  bad_token.insert(bad_token.end(), {"--token", "sph_wrong"});
  const CliResult refused = Cli(address, bad_token);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("refused the call (unknown token)"), std::string::npos) << refused.err;

  coordinator_.reset();  // nothing listens on the port any more
  const CliResult nobody = Cli(address, mtls);
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_NE(nobody.err.find("nothing is listening at " + address), std::string::npos) << nobody.err;

  int plain_port = 0;
  const std::string plain_line = StartCoordinator({});
  ASSERT_EQ(std::sscanf(plain_line.c_str(), "listening %d", &plain_port), 1) << plain_line;
  const CliResult tls_to_plain = Cli("127.0.0.1:" + std::to_string(plain_port), mtls);
  EXPECT_EQ(tls_to_plain.exit_code, 1);
  EXPECT_NE(tls_to_plain.err.find("the coordinator does not speak TLS"), std::string::npos)
      << tls_to_plain.err;
}

}  // namespace
}  // namespace spheret
