/*
 * ucx_pxn_info against registries made with the real Registry API in a
 * private base directory: what it shows, its JSON, its reasons for what it
 * does not read, its exit status, and that it changes nothing.
 */
#include "registry_fixture.h"

#include <csignal>
#include <cstring>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using pxn::abi::store_relaxed;
using pxn_test::ForkedChild;
using pxn_test::RegistryTest;

/* A strict JSON syntax check (RFC 8259), enough to tell that the tool's
 * document parses. The tool writes ASCII only. */
class JsonChecker {
public:
    explicit JsonChecker(const std::string &text) : s_(text) {}

    bool document()
    {
        return value() && (skip_space(), pos_ == s_.size());
    }

private:
    void skip_space()
    {
        while ((pos_ < s_.size()) && strchr(" \t\r\n", s_[pos_])) {
            ++pos_;
        }
    }
    bool take(char c)
    {
        skip_space();
        if ((pos_ < s_.size()) && (s_[pos_] == c)) {
            ++pos_;
            return true;
        }
        return false;
    }
    bool literal(const char *word)
    {
        if (s_.compare(pos_, strlen(word), word) != 0) {
            return false;
        }
        pos_ += strlen(word);
        return true;
    }
    bool value()
    {
        skip_space();
        if (take('{')) {
            return members('}', true);
        } else if (take('[')) {
            return members(']', false);
        } else if ((pos_ < s_.size()) && (s_[pos_] == '"')) {
            return string();
        }
        return literal("true") || literal("false") || literal("null") || number();
    }
    bool members(char close, bool object)
    {
        if (take(close)) {
            return true;
        }
        do {
            if (object && !(skip_space(), string() && take(':'))) {
                return false;
            }
            if (!value()) {
                return false;
            }
        } while (take(','));
        return take(close);
    }
    bool string()
    {
        if (!take('"')) {
            return false;
        }
        while (pos_ < s_.size()) {
            const unsigned char c = s_[pos_++];
            if (c == '"') {
                return true;
            } else if ((c < 0x20) || (c >= 0x7f)) {
                return false;
            } else if (c == '\\') {
                const char e = (pos_ < s_.size()) ? s_[pos_++] : '\0';
                if (e == 'u') {
                    for (int i = 0; i < 4; ++i, ++pos_) {
                        if ((pos_ >= s_.size()) || !isxdigit(s_[pos_])) {
                            return false;
                        }
                    }
                } else if ((e == '\0') || !strchr("\"\\/bfnrt", e)) {
                    return false;
                }
            }
        }
        return false;
    }
    bool number()
    {
        const size_t start = pos_;
        pos_ += (pos_ < s_.size()) && (s_[pos_] == '-');
        while ((pos_ < s_.size()) && isdigit(s_[pos_])) {
            ++pos_;
        }
        return pos_ > start;
    }

    const std::string &s_;
    size_t             pos_ = 0;
};

class InfoToolTest : public RegistryTest {
protected:
    pxn_test::ChildResult info(std::vector<std::string> args = {})
    {
        std::vector<std::string> argv = {tool(), "--base", base_.path()};
        if (std::find(args.begin(), args.end(), "--all") == args.end()) {
            argv.insert(argv.end(), {"--group", settings_.group});
        }
        argv.insert(argv.end(), args.begin(), args.end());
        return pxn_test::run_program(argv, {"UCX_PXN_GROUP="});
    }

    static std::string tool()
    {
        return pxn_test::build_dir() + "/src/tools/ucx_pxn_info";
    }

    /* This process publishes a relay entry with counters; a child process
     * (itself a relay) claims one of its lanes and writes its producer
     * fields; this process adds a route request. */
    void publish_relay_with_claimed_lane()
    {
        registry_ = open_registry();
        ASSERT_NE(nullptr, registry_);
        relay_ = published_entry(registry_.get(), &arena_);
        ASSERT_NE(nullptr, relay_);
        ASSERT_EQ(UCS_OK, relay_->create_wakeup(&wakeup_));
        auto *c = reinterpret_cast<pxn::abi::ProcessCounters*>(
                relay_->view().base + pxn::abi::kCountersOffset);
        store_relaxed(c->relay.pieces, uint64_t(11));
        store_relaxed(c->relay.bytes, uint64_t(45056));
        store_relaxed(c->relay.rejected, uint64_t(2));
        store_relaxed(c->relay.lane_resets, uint64_t(1));
        store_relaxed(c->relay.lanes_backed, uint64_t(2));
        store_relaxed(c->relay.lane_commits, uint64_t(3));
        store_relaxed(c->relay.lane_commit_ns, uint64_t(4500000));
        store_relaxed(c->relay.warm_claims, uint64_t(5));
        store_relaxed(c->relay.inner_ops, uint64_t(13));
        store_relaxed(c->relay.inner_sgl_ops, uint64_t(3));
        store_relaxed(c->sender.lane_open_ns, uint64_t(7300000));
        store_relaxed(c->sender.lane_map_ns, uint64_t(2000000));
        store_relaxed(c->sender.credit_stalls, uint64_t(4));
        store_relaxed(c->sender.fallback_bytes, uint64_t(777));
        store_relaxed(c->relay.am_pieces, uint64_t(6));
        store_relaxed(c->relay.am_messages, uint64_t(40));
        store_relaxed(c->relay.am_bytes, uint64_t(8000));
        store_relaxed(c->relay.am_credit_waits, uint64_t(1));
        store_relaxed(c->sender.am_sent, uint64_t(41));
        store_relaxed(c->sender.am_received, uint64_t(39));
        store_relaxed(c->sender.am_refused, uint64_t(2));

        sender_ = start_processes(1)[0];
        ASSERT_EQ("claimed 1", command(sender_, "claim"));
        ASSERT_EQ("scribbled", command(sender_, "scribble"));
        for (uint32_t i = 0; i < relay_->lanes(); ++i) {
            if (relay_->lane(i).owner().owner_pid == uint32_t(sender_->pid())) {
                lane_ = int(i);
            }
        }
        ASSERT_GE(lane_, 0);
        store_relaxed(relay_->lane(lane_).route(2).request.request_gen, uint64_t(1));
    }

    /* The table row of a lane, split at spaces. */
    static std::vector<std::string> lane_row(const std::string &out, int lane,
                                             const std::string &owner)
    {
        std::istringstream lines(out);
        for (std::string line; std::getline(lines, line);) {
            std::istringstream        words(line);
            std::vector<std::string>  row;
            for (std::string w; words >> w;) {
                row.push_back(w);
            }
            if ((row.size() >= 3) && (row[0] == std::to_string(lane)) &&
                (row[2] == owner)) {
                return row;
            }
        }
        return {};
    }

    std::unique_ptr<pxn::Registry>      registry_;
    std::unique_ptr<pxn::RegistryEntry> relay_;
    pxn::UniqueFd                       arena_;
    pxn::RelayWakeup                    wakeup_;
    ForkedChild                        *sender_ = nullptr;
    int                                 lane_   = -1;
};

TEST_F(InfoToolTest, ShowsARelayItsCountersAndTheOwnerOfAClaimedLane)
{
    ASSERT_EQ(0, access(tool().c_str(), X_OK)) << tool() << ": build it first";
    publish_relay_with_claimed_lane();
    const std::set<std::string> before = files();

    const auto r = info();
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("2 entries")) << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find(relay_->control_name() + ": READY, pid " +
                            std::to_string(getpid()) + " alive, epoch"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("node node-a, rail rail1, device mlx5_1, inner tcp"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("geometry 7 lanes x 4 slots x 4 KiB, max plan 8, arena "
                            "host_shm 112 KiB, arena file, wake file"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("relay:  pieces 11 bytes 45056 failed_pieces 0 "
                            "rejected 2 routes 0 (0 active) route_errors 0 lane_resets 1"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("sender: pieces 0 bytes 0 credit_stalls 4 failed_ops 0 "
                            "fallback_ops 0 fallback_bytes 777 lanes 0"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("inflight 0 inner_ops 13 (3 sgl) gets 0 (0 bytes), last completion never\n"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("am:     relay pieces 6 messages 40 bytes 8000 "
                            "credit_waits 1; sender sent 41 received 39 refused 2\n"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("memory: lanes_backed 2 lane_commits 3 (4.5 ms) "
                            "warm_claims 5; sender lane_open 7.3 ms (mapping "
                            "2.0 ms)\n"))
            << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("problem")) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find("STALE")) << r.output;

    /* lane state owner liveness lane_epoch acked head doorbell reaped
     * consumed completed credit routes rkeys */
    const auto row = lane_row(r.output, lane_, std::to_string(sender_->pid()));
    ASSERT_EQ(14u, row.size()) << r.output;
    EXPECT_EQ("claimed", row[1]);
    EXPECT_EQ("alive", row[3]);
    EXPECT_EQ(16u, row[4].size());
    EXPECT_EQ("no", row[5]); /* no relay engine acknowledges here */
    EXPECT_EQ((std::vector<std::string>{"7", "7", "5", "0", "6", "2/4", "1", "1"}),
              std::vector<std::string>(row.begin() + 6, row.end()));

    EXPECT_NE(std::string::npos, r.output.find("1-6 never claimed")) << r.output;
    /* The child's own entry has no lane claimed by anybody. */
    EXPECT_NE(std::string::npos, r.output.find("lanes: none ever claimed"))
            << r.output;
    /* Read only: nothing created, removed or reclaimed. */
    EXPECT_EQ(before, files());
    EXPECT_EQ(uint32_t(sender_->pid()), relay_->lane(lane_).owner().owner_pid);
}

TEST_F(InfoToolTest, JsonOutputIsOneDocumentWithTheSameFacts)
{
    publish_relay_with_claimed_lane();
    const auto r = info({"--json"});
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_TRUE(JsonChecker(r.output).document()) << r.output;
    for (const std::string &key :
         {std::string("\"tool\":\"ucx_pxn_info\""), std::string("\"state\":\"READY\""),
          std::string("\"process\":\"alive\",\"stale\":false"),
          std::string("\"rail\":\"rail1\""), std::string("\"slots\":4"),
          std::string("\"pieces\":11,\"bytes\":45056"),
          std::string("\"fallback_bytes\":777"),
          std::string("\"am_pieces\":6,\"am_messages\":40,\"am_bytes\":8000,"
                      "\"am_credit_waits\":1"),
          std::string("\"am_sent\":41,\"am_received\":39,\"am_refused\":2"),
          std::string("\"owner_pid\":" + std::to_string(sender_->pid()) +
                      ",\"owner\":\"alive\""),
          std::string("\"head\":7,\"doorbell\":7,\"reaped\":5"),
          std::string("\"credit_in_use\":2,\"credit_garbage\":false,"
                      "\"route_requests_pending\":1,\"rkeys_in_use\":1"),
          std::string("\"files\":[\"arena\",\"wake\"]")}) {
        EXPECT_NE(std::string::npos, r.output.find(key)) << key << "\n" << r.output;
    }
}

TEST_F(InfoToolTest, EscapesStringsFromFilesInJsonAndInTheTable)
{
    registry_ = open_registry(); /* the directory, kept */
    ASSERT_NE(nullptr, registry_);
    auto h = header(getpid(), own_start_time(), 0x77);
    strcpy(h.device, "d\"e\\v\x01\x1b[2J\xc3");
    memset(h.rail, 'r', sizeof(h.rail)); /* no NUL at all */
    write_entry(h);
    const auto json = info({"--json"});
    ASSERT_EQ(0, json.exit_code) << json.output;
    EXPECT_TRUE(JsonChecker(json.output).document()) << json.output;
    EXPECT_NE(std::string::npos,
              json.output.find("\"device\":\"d\\\"e\\\\v\\u0001\\u001b[2J\\u00c3\""))
            << json.output;
    EXPECT_NE(std::string::npos,
              json.output.find("\"rail\":\"" + std::string(64, 'r') + "\""));

    const auto text = info();
    ASSERT_EQ(0, text.exit_code) << text.output;
    EXPECT_NE(std::string::npos, text.output.find("device d\"e\\v\\x01\\x1b[2J\\xc3,"))
            << text.output;
    EXPECT_EQ(std::string::npos, text.output.find('\x1b'));
    /* a hand-written entry without arena file */
    EXPECT_NE(std::string::npos,
              text.output.find("problem: its host arena file is missing"));
}

TEST_F(InfoToolTest, ShowsDeadAndPidReusedEntriesAsStaleAndLeavesThem)
{
    ForkedChild *victim = start_processes(1)[0];
    const std::string pid = std::to_string(victim->pid());
    victim->kill(SIGKILL);
    EXPECT_EQ(-SIGKILL, victim->wait());
    write_entry(header(getpid(), own_start_time() + 1, 0x99));
    const std::set<std::string> before = files();
    EXPECT_EQ(5u, before.size()); /* .lock, ctl + arena + wake, reused ctl */

    const auto r = info();
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("READY, pid " + pid + " dead (STALE)"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("pid " + std::to_string(getpid()) +
                            " reused by another process (STALE)"))
            << r.output;
    const auto json = info({"--json"});
    EXPECT_NE(std::string::npos,
              json.output.find("\"process\":\"dead\",\"stale\":true"))
            << json.output;
    EXPECT_EQ(before, files()); /* no cleanup */
}

TEST_F(InfoToolTest, CleanRemovesDeadEntriesAndLeavesLiveOnes)
{
    registry_ = open_registry();
    ASSERT_NE(nullptr, registry_);
    relay_ = published_entry(registry_.get(), &arena_); /* this process: live */
    ASSERT_NE(nullptr, relay_);
    ForkedChild *victim = start_processes(1)[0];
    const std::string pid = std::to_string(victim->pid());
    victim->kill(SIGKILL);
    EXPECT_EQ(-SIGKILL, victim->wait());
    const std::set<std::string> before = files();
    /* .lock, our ctl + arena, the victim's ctl + arena + wake */
    ASSERT_EQ(6u, before.size()) << ::testing::PrintToString(before);

    const auto r = info({"--clean"});
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(": dead, with its arena file and "
                                               "wake file")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("1 stale entries removed (3 files)"))
            << r.output;
    std::set<std::string> left = files();
    EXPECT_EQ(3u, left.size()) << r.output;
    EXPECT_EQ(1u, left.count(relay_->control_name())) << r.output;
    for (const std::string &f : left) {
        EXPECT_EQ(std::string::npos, f.find("p" + pid + "-")) << f;
    }

    /* nothing stale: nothing removed, still success */
    const auto again = info({"--clean"});
    EXPECT_EQ(0, again.exit_code) << again.output;
    EXPECT_EQ(left, files());
    /* a group without a registry: an error, and none is created */
    const auto none = pxn_test::run_program({tool(), "--base", base_.path(),
                                             "--group", "nosuch", "--clean"},
                                            {"UCX_PXN_GROUP="});
    EXPECT_EQ(1, none.exit_code) << none.output;
    EXPECT_NE(0, access((base_.path() + "/ucx-pxn-" + std::to_string(geteuid()) +
                         "-nosuch").c_str(), F_OK));
    EXPECT_EQ(2, info({"--clean", "--json"}).exit_code);
}

TEST_F(InfoToolTest, CleanRemovesTheDirectoryOfAGroupNobodyUses)
{
    ForkedChild *victim = start_processes(1)[0];
    victim->kill(SIGKILL);
    EXPECT_EQ(-SIGKILL, victim->wait());
    ASSERT_EQ(4u, files().size()) << "its entry stays: .lock, ctl, arena, wake";

    const auto r = info({"--clean"});
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("1 stale entries removed (3 files)"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find(dir_ + ": no process uses it any more: removed\n"))
            << r.output;
    EXPECT_NE(0, access(dir_.c_str(), F_OK));
}

TEST_F(InfoToolTest, ShowsWhatItDoesNotReadWithTheReason)
{
    registry_ = open_registry(); /* the directory, kept */
    ASSERT_NE(nullptr, registry_);
    const uint64_t start = own_start_time();
    auto magic  = header(getpid(), start, 1);
    magic.magic = 0x4242;
    write_entry(magic);
    write_entry(header(getpid(), start, 2), pxn::kSuffixControl, 100, 100);
    write_entry(header(getpid(), start, 3), pxn::kSuffixControl,
                int64_t(pxn::control_file_size(settings_.geometry) / 2));
    pxn::Geometry huge = settings_.geometry;
    huge.lanes         = 100; /* consistent with itself, beyond kMaxLanes */
    write_entry(header_for(huge, getpid(), start, 4));
    auto newer        = header(getpid(), start, 5);
    newer.abi_version = pxn::abi::kAbiVersion + 1;
    write_entry(newer, pxn::kSuffixInit);
    ASSERT_EQ(0, mkfifo(path(6).c_str(), 0600));
    const std::string loose = write_entry(header(getpid(), start, 7));
    ASSERT_EQ(0, chmod(path(loose).c_str(), 0644));
    write_entry(header(dead_pid(), 1, 8), pxn::kSuffixArena, 4096, 0);
    ASSERT_EQ(0, close(open(path("notes.txt").c_str(), O_CREAT | O_WRONLY, 0600)));

    const auto r = info();
    ASSERT_EQ(0, r.exit_code) << r.output;
    const std::string newer_abi = ".init: being created, NOT READ: ABI version " +
                                  std::to_string(pxn::abi::kAbiVersion + 1);
    for (const char *why :
         {newer_abi.c_str(), ".ctl: NOT READ: wrong magic 0x0000000000004242",
          ".ctl: NOT READ: truncated: 100 bytes, smaller than a header",
          ".ctl: NOT READ: truncated or padded", "geometry out of pxn's limits: "
          "lanes=100",
          ".ctl: NOT READ: a fifo, not a regular file",
          "problem: mode 0644, expected 0600",
          ".arena: stray arena file (no control file); pid ",
          "notes.txt: unexpected file"}) {
        EXPECT_NE(std::string::npos, r.output.find(why)) << why << "\n" << r.output;
    }
    EXPECT_NE(std::string::npos, r.output.find("9 entries")) << r.output;
}

TEST_F(InfoToolTest, ExitsWith1WithoutARegistryOrEntriesAnd2OnBadUsage)
{
    auto r = info();
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("no pxn registry " + dir_)) << r.output;

    registry_ = open_registry(); /* the directory with .lock only, kept */
    ASSERT_NE(nullptr, registry_);
    r = info();
    EXPECT_EQ(1, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("0 entries")) << r.output;
    EXPECT_NE(std::string::npos, r.output.find("no pxn entries to show")) << r.output;

    for (const auto &args : std::vector<std::vector<std::string>>{
                 {"--bogus"}, {"--watch", "0"}, {"--watch", "x"}, {"--count", "2"},
                 {"--all", "--group", "g"}, {"--group", "a/b"}, {"extra"}}) {
        std::vector<std::string> argv = {tool(), "--base", base_.path()};
        argv.insert(argv.end(), args.begin(), args.end());
        r = pxn_test::run_program(argv);
        EXPECT_EQ(2, r.exit_code) << args[0] << ": " << r.output;
        EXPECT_NE(std::string::npos, r.output.find("usage:")) << r.output;
    }
}

TEST_F(InfoToolTest, AllShowsEveryGroupOfThisUidAndListsOtherUids)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry = published_entry(registry.get());
    const std::string other = base_.path() + "/ucx-pxn-" +
                              std::to_string(pxn_test::kForeignUid) + "-job";
    ASSERT_EQ(0, mkdir(other.c_str(), 0700));
    const std::string loose = base_.path() + "/ucx-pxn-" +
                              std::to_string(geteuid()) + "-loose";
    ASSERT_EQ(0, mkdir(loose.c_str(), 0755));

    const auto r = info({"--all"});
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_NE(std::string::npos, r.output.find(entry->control_name() + ": READY"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find(other + " (uid 12345, group job): registry of uid 12345: "
                            "not read"))
            << r.output;
    EXPECT_NE(std::string::npos,
              r.output.find("problem: mode 0755, expected 0700: pxn refuses this "
                            "directory"))
            << r.output;
}

TEST_F(InfoToolTest, WatchRefreshesWithoutClearingAPipe)
{
    auto registry = open_registry();
    ASSERT_NE(nullptr, registry);
    auto entry = published_entry(registry.get());
    const auto r = info({"--watch", "0.05", "--count", "3"});
    ASSERT_EQ(0, r.exit_code) << r.output;
    size_t refreshes = 0;
    for (size_t at = 0; (at = r.output.find("ucx_pxn_info every 0.05s", at)) !=
                        std::string::npos; ++at) {
        ++refreshes;
    }
    EXPECT_EQ(3u, refreshes) << r.output;
    EXPECT_EQ(std::string::npos, r.output.find('\x1b')) << "cleared a pipe";
}

} // namespace
