#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>

#include "mkernel/error.hpp"
#include "mkernel/knobs.hpp"
#include "tests/cpu/env_map.hpp"

using namespace mk;
using mk::test::env_of;
using mk::test::expect_error;

TEST(Knobs, DefaultsWhenUnset) {
  auto env = env_of({});
  EXPECT_EQ(knob_int(Knob::MK_TIMEOUT_MS, env), 5000);
  EXPECT_EQ(knob_int(Knob::MK_RANKS_PER_NODE, env), 0);
  EXPECT_EQ(knob_str(Knob::MK_SYMM_MODE, env), "auto");
  EXPECT_EQ(knob_str(Knob::MK_BOOTSTRAP_ADDR, env), "");
}

// Every knob's declared default parses as its own type, within its range or choices (a default outside them would
// fail every run that leaves the knob unset, at init, naming a variable nobody set).
TEST(Knobs, EveryDefaultParsesAsItsOwnType) {
  const auto env = env_of({});
  for (size_t i = 0; i < knob_specs().size(); ++i) {
    const auto& s = knob_specs()[i];
    const auto k = static_cast<Knob>(i);
    switch (s.type) {
      case KnobType::Int: EXPECT_NO_THROW(knob_int(k, env)) << s.name << "='" << s.def << "'"; break;
      case KnobType::Bool: EXPECT_NO_THROW(knob_bool(k, env)) << s.name << "='" << s.def << "'"; break;
      case KnobType::String:
      case KnobType::Choice: EXPECT_NO_THROW(knob_str(k, env)) << s.name << "='" << s.def << "'"; break;
    }
  }
}

TEST(Knobs, ParsesValidValues) {
  auto env = env_of({{"MK_TIMEOUT_MS", "250"}, {"MK_SYMM_MODE", "IPC"}, {"MK_RANKS_PER_NODE", "4"}});
  EXPECT_EQ(knob_int(Knob::MK_TIMEOUT_MS, env), 250);
  EXPECT_EQ(knob_str(Knob::MK_SYMM_MODE, env), "ipc");
  EXPECT_EQ(knob_int(Knob::MK_RANKS_PER_NODE, env), 4);
}

TEST(Knobs, EmptyValueMeansDefault) {
  EXPECT_EQ(knob_int(Knob::MK_TIMEOUT_MS, env_of({{"MK_TIMEOUT_MS", ""}})), 5000);
}

TEST(Knobs, RejectsBadValuesWithClearMessages) {
  EXPECT_EQ(expect_error([] { knob_int(Knob::MK_TIMEOUT_MS, env_of({{"MK_TIMEOUT_MS", "5s"}})); },
                         {"MK_TIMEOUT_MS", "'5s'", "not an integer"}),
            "");
  EXPECT_EQ(expect_error([] { knob_int(Knob::MK_TIMEOUT_MS, env_of({{"MK_TIMEOUT_MS", "0"}})); },
                         {"MK_TIMEOUT_MS", "out of range"}),
            "");
  EXPECT_EQ(expect_error([] { knob_int(Knob::MK_RANKS_PER_NODE, env_of({{"MK_RANKS_PER_NODE", "-2"}})); },
                         {"MK_RANKS_PER_NODE", "out of range"}),
            "");
  // An integer past int64 is out of range, not "not an integer" (session 48).
  const auto port = [](const char* v) { knob_int(Knob::MK_BOOTSTRAP_PORT, env_of({{"MK_BOOTSTRAP_PORT", v}})); };
  EXPECT_EQ(expect_error([&] { port("99999999999999999999"); },
                         {"MK_BOOTSTRAP_PORT", "'99999999999999999999' is out of range [0, 65535]"}),
            "");
  EXPECT_EQ(expect_error([&] { port("9999999999999999999x"); }, {"MK_BOOTSTRAP_PORT", "not an integer"}), "");
  // White space on either side is refused alike (strtoll skipped the leading kind); the message names the range.
  for (const char* v : {" 80", "80 ", "\t80"})
    EXPECT_EQ(expect_error([&] { port(v); }, {"MK_BOOTSTRAP_PORT", "not an integer", "in [0, 65535]"}), "") << v;
  EXPECT_EQ(expect_error([] { knob_str(Knob::MK_SYMM_MODE, env_of({{"MK_SYMM_MODE", "nvls"}})); },
                         {"MK_SYMM_MODE", "'nvls'", "auto|vmm|ipc"}),
            "");
}

TEST(Knobs, ReadingWithTheWrongTypeIsAnError) {
  EXPECT_EQ(expect_error([] { knob_bool(Knob::MK_TIMEOUT_MS, env_of({})); }, {"internal", "MK_TIMEOUT_MS"}), "");
}

TEST(Knobs, ValidateReportsBadValuesAndUnknownNames) {
  auto unknown = validate_knobs(env_of({{"MK_TIMEOUT_MS", "10"}}), {"MK_TIMEOUT_MS", "MK_TIMOUT_MS", "PATH"});
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0], "MK_TIMOUT_MS");
  EXPECT_EQ(expect_error([] { validate_knobs(env_of({{"MK_LOG", "loud"}}), {}); }, {"MK_LOG", "loud"}), "");
  // The tools' own knobs are not the library's to refuse (MK_BUILD_JOBS=auto stopped every communicator).
  EXPECT_NO_THROW(validate_knobs(env_of({{"MK_BUILD_JOBS", "auto"}, {"MK_GPU_TEST_STEP_S", "-1"}}), {}));
}

TEST(Knobs, PrintConfigListsEveryKnobWithItsValue) {
  std::string s = print_config(env_of({{"MK_TIMEOUT_MS", "1234"}}));
  for (const auto& k : knob_specs()) {
    EXPECT_NE(s.find(k.name), std::string::npos) << k.name;
    EXPECT_GT(std::string(k.doc).size(), 10u) << k.name << " needs a doc string";
  }
  EXPECT_NE(s.find("'1234' [set]"), std::string::npos) << s;
}

// One line per message, the library named once (mk::Error's "mkernel: ..." and
// messages that begin "mkernel GemmAr ..." keep their own).
TEST(Knobs, LogLinesNameTheLibraryOnceAndEndTheLine) {
  EXPECT_EQ(mk::log_line("rank 0: network emu"), "mkernel: rank 0: network emu\n");
  EXPECT_EQ(mk::log_line("mkernel: rank 1 proxy queue 0: PUT #3"), "mkernel: rank 1 proxy queue 0: PUT #3\n");
  EXPECT_EQ(mk::log_line("mkernel GemmAr runs on the legacy default stream"),
            "mkernel GemmAr runs on the legacy default stream\n");
  EXPECT_EQ(mk::log_line("mkernels: x"), "mkernel: mkernels: x\n");
  EXPECT_EQ(mk::log_line(""), "mkernel: \n");
}

// A malformed MK_LOG cannot make the log throw, but it is said once, naming the variable and its value (it was
// dropped without a word). In a fresh process (the level is read once per process).
TEST(Knobs, AMalformedLogLevelIsSaid) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("MK_LOG", "loud", 1);
        mk::log(mk::LogLevel::Warn, "a warning");
        mk::log(mk::LogLevel::Warn, "a second warning");
        mk::log(mk::LogLevel::Info, "not shown");
        std::exit(0);
      },
      // once: the second warning follows the first with no word of MK_LOG between them
      ::testing::ExitedWithCode(0), "MK_LOG.*loud.*default level.*\n.*a warning\n[^\n]*a second warning");
}

// Each level adds to the one below it (debug's own lines: each plan's choices, tests/gpu/test_tp_single_rank.cu).
TEST(Knobs, EachLogLevelShowsItsLinesAndTheLevelsBelow) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (const char* lvl : {"warn", "info", "debug"}) {
    const std::string l(lvl);
    const std::string want = l == "warn"   ? "^mkernel: w\n$"
                             : l == "info" ? "^mkernel: w\nmkernel: i\n$"
                                           : "^mkernel: w\nmkernel: i\nmkernel: d\n$";
    EXPECT_EXIT(
        {
          setenv("MK_LOG", lvl, 1);
          mk::log(mk::LogLevel::Warn, "w");
          mk::log(mk::LogLevel::Info, "i");
          mk::log(mk::LogLevel::Debug, "d");
          std::exit(0);
        },
        ::testing::ExitedWithCode(0), want)
        << "MK_LOG=" << lvl;
  }
}

// A stderr that nobody drains cannot hold a logging thread: the first line waits 1 s for room and is dropped, the
// next ones do not wait, and once the pipe is read again the next line says how many were dropped (a plain write(2)
// blocked for ever). In a fresh process, whose fd 2 becomes a full pipe; it reports on the saved fd 2.
TEST(Knobs, ALogLineWaitsBoundedForAStderrNobodyReads) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int p[2];
        if (::pipe(p) != 0) std::exit(2);
        ::fcntl(p[1], F_SETFL, O_NONBLOCK);
        const std::string fill(4096, 'x');
        while (::write(p[1], fill.data(), fill.size()) > 0) {
        }
        ::fcntl(p[1], F_SETFL, 0);  // blocking again, as a process's stderr is
        const int saved = ::dup(2);
        ::dup2(p[1], 2);
        using clock = std::chrono::steady_clock;
        auto ms = [](clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
        const auto t0 = clock::now();
        mk::log(mk::LogLevel::Warn, "one");
        const auto t1 = clock::now();
        mk::log(mk::LogLevel::Warn, "two");
        const auto t2 = clock::now();
        ::fcntl(p[0], F_SETFL, O_NONBLOCK);
        std::string buf(1 << 16, '\0');
        while (::read(p[0], buf.data(), buf.size()) > 0) {
        }
        mk::log(mk::LogLevel::Warn, "three");
        std::string got;
        for (ssize_t n; (n = ::read(p[0], buf.data(), buf.size())) > 0;) got.append(buf.data(), static_cast<size_t>(n));
        ::dup2(saved, 2);
        const std::string said = mk::cat("first ", ms(t1 - t0), " ms, second ", ms(t2 - t1), " ms; read: ", got);
        [[maybe_unused]] const ssize_t w = ::write(2, said.data(), said.size());
        const bool ok = ms(t1 - t0) >= 900 && ms(t1 - t0) < 5000 && ms(t2 - t1) < 100 &&
                        got == "mkernel: 2 log line(s) dropped or cut short before this one: stderr took no bytes for "
                               "1000 ms (a pipe that nobody reads?)\nmkernel: three\n";
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "read: mkernel: 2 log line.s. dropped.*\nmkernel: three\n");
}

// A stderr socket that nobody reads, with a send buffer much smaller than a line: a blocking write(2) of the line
// waited for ever (before 0b2c141). The line is cut short after 1 s, and the next line that gets through starts on
// a line of its own, saying so. (Not tested, bounded by construction: other writers of a pipe taking the room a
// poll saw before this process's write, which then blocked; pipes are written through an O_NONBLOCK descriptor.)
TEST(Knobs, ALogLineIsNotHeldByAStderrSocketWithASmallBuffer) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int s[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0) std::exit(2);
        const int small = 4096;  // (the kernel's floor is about this; the line is longer than what it lets through)
        ::setsockopt(s[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        const int saved = ::dup(2);
        ::dup2(s[1], 2);
        ::alarm(30);  // (a write that blocks for ever fails the test instead of hanging it)
        using clock = std::chrono::steady_clock;
        auto ms = [](clock::duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
        const auto t0 = clock::now();
        mk::log(mk::LogLevel::Warn, std::string(1 << 16, 'a'));
        const auto t1 = clock::now();
        std::string got;
        std::string buf(1 << 16, '\0');
        ::fcntl(s[0], F_SETFL, O_NONBLOCK);
        for (ssize_t n; (n = ::read(s[0], buf.data(), buf.size())) > 0;) got.append(buf.data(), static_cast<size_t>(n));
        const size_t first = got.size();
        mk::log(mk::LogLevel::Warn, "two");
        ::usleep(100 * 1000);
        for (ssize_t n; (n = ::read(s[0], buf.data(), buf.size())) > 0;) got.append(buf.data(), static_cast<size_t>(n));
        ::dup2(saved, 2);
        const std::string rest = got.substr(first);
        const std::string said = mk::cat("first ", ms(t1 - t0), " ms, ", first, " bytes of it; then: ", rest);
        [[maybe_unused]] const ssize_t w = ::write(2, said.data(), said.size());
        const bool ok = ms(t1 - t0) >= 900 && ms(t1 - t0) < 5000 && first > 0 && first < (1 << 16) &&
                        rest == "\nmkernel: 1 log line(s) dropped or cut short before this one: stderr took no bytes "
                                "for 1000 ms (a pipe that nobody reads?)\nmkernel: two\n";
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "then: \nmkernel: 1 log line.s. dropped or cut short.*\nmkernel: two\n");
}

// A stderr socket whose reader has gone: a log line is lost, and the process lives on (the send said
// MSG_NOSIGNAL; before, SIGPIPE's default action ended the process, e.g. the bootstrap root's host, at its
// first log line after the log collector went away).
TEST(Knobs, ALogLineToAStderrSocketNobodyReadsDoesNotKillTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int s[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM, 0, s) != 0) std::exit(2);
        ::close(s[0]);
        ::signal(SIGPIPE, SIG_DFL);
        ::dup2(s[1], 2);
        ::alarm(30);
        mk::log(mk::LogLevel::Warn, "nobody reads this");
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// The knobs that decide collective steps are compared across ranks in the
// communicator's first exchange (Communicator's constructor): the values are
// parsed, so spellings of one value agree, and the error names the knob and
// two ranks' values.
TEST(Knobs, CollectiveKnobsAgreeByValueNotSpelling) {
  const std::string base = collective_knob_values(env_of({}));
  EXPECT_NE(base.find("MK_RANKS_PER_NODE=0\n"), std::string::npos) << base;
  EXPECT_NE(base.find("MK_SIGNAL_REUSE=1\n"), std::string::npos) << base;
  EXPECT_NE(base.find("MK_NET=auto\n"), std::string::npos) << base;
  const std::string spelled = collective_knob_values(env_of({{"MK_SIGNAL_REUSE", "true"}, {"MK_NET", "AUTO"},
                                                             {"MK_RANKS_PER_NODE", ""}}));
  EXPECT_EQ(spelled, base);
  EXPECT_EQ(collective_knob_mismatch({base, spelled, base}), "");
  EXPECT_EQ(collective_knob_mismatch({}), "");
  // A knob that does not decide a collective step (MK_TIMEOUT_MS, MK_LOG) may differ.
  EXPECT_EQ(collective_knob_values(env_of({{"MK_TIMEOUT_MS", "250"}, {"MK_LOG", "debug"}})), base);
}

TEST(Knobs, CollectiveKnobsThatDifferNameTheKnobAndTheRanks) {
  const std::string base = collective_knob_values(env_of({}));
  const std::string split = collective_knob_values(env_of({{"MK_RANKS_PER_NODE", "4"}}));
  const std::string m = collective_knob_mismatch({base, base, split, base});
  EXPECT_NE(m.find("MK_RANKS_PER_NODE differs between ranks: rank 0 has '0', rank 2 has '4'"), std::string::npos) << m;
  EXPECT_NE(m.find("must be set alike on every rank"), std::string::npos) << m;
  const std::string reuse = collective_knob_values(env_of({{"MK_SIGNAL_REUSE", "off"}}));
  EXPECT_NE(collective_knob_mismatch({base, reuse}).find("MK_SIGNAL_REUSE differs between ranks: rank 0 has '1', "
                                                         "rank 1 has '0'"),
            std::string::npos);
  // Another build's list (a knob more or fewer): said as such.
  const std::string other = base + "MK_SOMETHING_NEW=1\n";
  EXPECT_NE(collective_knob_mismatch({base, other}).find("different mkernel builds"), std::string::npos);
  EXPECT_THROW(collective_knob_values(env_of({{"MK_NET", "carrier-pigeon"}})), Error);
  // A value with a newline stays on its knob's line (escaped), so the lists still line up.
  const std::string nl = collective_knob_values(env_of({{"MK_FI_PROVIDER", "tcp\nMK_NET=verbs"}}));
  EXPECT_NE(nl.find("MK_FI_PROVIDER=tcp\\nMK_NET=verbs\n"), std::string::npos) << nl;
  EXPECT_NE(collective_knob_mismatch({base, nl}).find("MK_FI_PROVIDER differs between ranks"), std::string::npos);
}

TEST(Knobs, CollectiveKnobsAreLibraryKnobs) {
  for (const Knob k : collective_knobs()) EXPECT_FALSE(knob_spec(k).tool) << knob_spec(k).name;
}

// MK_TOOL_KNOB marks exactly the knobs whose doc says the library ignores them (the doc stays true), and the
// enum has every knob of the table in order (the tool knobs among them).
TEST(Knobs, ToolKnobsAreTheOnesTheLibraryIgnores) {
  int tools = 0;
  for (size_t i = 0; i < knob_specs().size(); ++i) {
    const KnobSpec& s = knob_specs()[i];
    const std::string doc = s.doc;
    EXPECT_EQ(s.tool, doc.find("ignores it") != std::string::npos) << s.name << ": " << doc;
    EXPECT_EQ(&knob_spec(static_cast<Knob>(i)), &s);
    tools += s.tool;
  }
  EXPECT_EQ(tools, 15);
  EXPECT_TRUE(knob_spec(Knob::MK_BUILD_JOBS).tool);
  EXPECT_TRUE(knob_spec(Knob::MK_BENCH_OUT).tool);  // (mkbench only)
  EXPECT_TRUE(knob_spec(Knob::MK_SANITIZE_STEP_S).tool);
  EXPECT_STREQ(knob_spec(Knob::MK_TEST_TORCH).name, "MK_TEST_TORCH");
  EXPECT_FALSE(knob_spec(Knob::MK_TIMEOUT_MS).tool);
}

// What a benchmark report records of the MK_* environment: every name set, sorted, once, with its value.
TEST(Knobs, TheVariablesLineNamesEverySetVariableWithItsValue) {
  auto env = env_of({{"MK_SIGNAL_REUSE", "0"}, {"MK_EMU_AGENTS", "3"}, {"MK_TYPO", "x"}});
  EXPECT_EQ(mk_variables_line({"MK_SIGNAL_REUSE", "MK_TYPO", "MK_EMU_AGENTS", "MK_TYPO"}, env),
            "MK_EMU_AGENTS=3, MK_SIGNAL_REUSE=0, MK_TYPO=x");
  EXPECT_EQ(mk_variables_line({}, env), "none");
  ::setenv("MK_TEST_VARIABLES_LINE", "7", 1);
  const std::string line = mk_variables_line(mk_variables_in_environment());
  ::unsetenv("MK_TEST_VARIABLES_LINE");
  EXPECT_NE(line.find("MK_TEST_VARIABLES_LINE=7"), std::string::npos) << line;
}
