// netswitch: a userspace Ethernet switch with link delay and rate, for bench/multinode.sh
// on kernels without sch_netem. Benchmark tooling only; not part of the serving path.
//
// Contract:
//   netswitch --port=NETNS:IFNAME [--port=...] [--delay=0.2ms] [--rate=10gbit]
//             [--ready=FILE] [--limit=10000] [--spin_us=50] [--realtime] [--keep_awake]
// * For every --port it enters network namespace NETNS (a name under /var/run/netns,
//   or a path such as /proc/PID/ns/net), creates TAP device IFNAME there and keeps its
//   fd; the device lives in that namespace and disappears when this process exits.
//   Addresses, MTU and link state are the caller's business. The TAPs carry a virtio
//   net header and offer checksum and TSO offload, so a host's TCP stack hands over
//   segments of up to 64 KiB as one packet (as over veth): they are forwarded whole,
//   header included, and the receiving stack takes them as it would from a NIC.
// * Once all TAPs exist it writes "ready\n" to FILE (if given) and forwards frames:
//   it learns source MACs per port and sends each frame to the port its destination
//   was learned on; broadcast, multicast and unknown destinations go to all other ports.
// * Timing, per packet of B bytes, with tx = B*8/rate: the sender's link serialises it
//   (sent = max(read time, previous sent of that port) + tx); its last byte reaches the
//   receiver --delay later, unless the receiver's link is still busy with earlier
//   packets (deliver = max(sent + delay, previous deliver of that port + tx); cut
//   through, as a stream of small frames would go). It is written at `deliver`.
//   Constant delay and per-port serialisation keep packets in order; a ping between two
//   ports sees RTT = 2 * (delay + tx) plus scheduling noise.
// * Deadlines sit in a min-heap; the process sleeps on an absolute timerfd (timer slack
//   1 ns) until shortly before the next one, then busy-polls until it is due. How
//   early it wakes follows the measured timer wake-up latency (average + 5 us, at most
//   --spin_us), so deadlines are met within a few microseconds on an idle core while
//   the spinning stays short. --realtime asks for SCHED_FIFO (falls back with a
//   warning), so a busy machine delays frames less. --keep_awake runs one SCHED_IDLE
//   busy loop per allowed CPU for the switch's lifetime: in a VM whose idle vCPUs halt,
//   waking a halted vCPU for a timer or a frame can take 0.1-10 ms, far more than the
//   delay being emulated; the loops only use time no other thread wants.
// * More than --limit packets queued towards one port: further ones to it are dropped.
// * SIGTERM, SIGINT or SIGHUP (also sent when the parent dies) end it; it prints one
//   line of forwarding statistics (packets, drops, lateness of writes against their
//   deadlines, CPU time of the forwarding thread) to stderr and exits 0. Bad arguments
//   or setup failures: a message on stderr, exit 1.
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "netswitch: %s\n", message.c_str());
  std::exit(1);
}

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// "0.2ms", "200us", "2ms", "1s", "500ns" -> nanoseconds. A bare number is microseconds
// (as in tc).
int64_t ParseDuration(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  const std::pair<const char*, double> units[] = {
      {"ns", 1}, {"us", 1e3}, {"", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  double scale = -1;
  for (const auto& [name, factor] : units) {
    if (unit == name) scale = factor;
  }
  if (scale < 0) Die("bad duration '" + text + "' (units: ns, us, ms, s)");
  if (end == text.c_str() || value < 0) Die("bad duration '" + text + "'");
  return static_cast<int64_t>(value * scale + 0.5);
}

// tc-style rates: "10gbit", "100mbit", "1kbit", "800bit"; "...bps" units are bytes
// per second ("125mbps" = 1gbit). Returns bits per second.
double ParseRate(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit(end);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  const char* prefixes[] = {"", "k", "m", "g", "t"};
  for (int i = 0; i < 5; ++i) {
    double p = 1;
    for (int j = 0; j < i; ++j) p *= 1000;
    if (unit == std::string(prefixes[i]) + "bit") scale = p;
    if (unit == std::string(prefixes[i]) + "bps") scale = 8 * p;
  }
  if (end == text.c_str() || scale == 0 || value <= 0) {
    Die("bad rate '" + text + "' (e.g. 10gbit, 100mbit, 125mbps)");
  }
  return value * scale;
}

struct Port {
  std::string netns, name;
  int fd = -1;
  int64_t in_free = 0;   // When this port's link towards the switch is next idle.
  int64_t out_free = 0;  // When the link from the switch to this port is next idle.
  int queued = 0;        // Frames scheduled for delivery to this port.
};

struct Pending {
  int64_t due;
  uint64_t seq;  // Ties keep arrival order.
  int port;
  std::shared_ptr<const std::vector<uint8_t>> frame;
  bool operator>(const Pending& o) const { return due != o.due ? due > o.due : seq > o.seq; }
};

int OpenTapIn(const Port& port, int home_ns) {
  std::string path =
      port.netns.find('/') == std::string::npos ? "/var/run/netns/" + port.netns : port.netns;
  int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) Die("cannot open namespace " + path + ": " + std::strerror(errno));
  if (setns(ns, CLONE_NEWNET) != 0) Die("setns " + path + ": " + std::strerror(errno));
  close(ns);
  // The device is created in the namespace current when /dev/net/tun is opened.
  int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) Die(std::string("cannot open /dev/net/tun: ") + std::strerror(errno));
  ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
  if (port.name.size() >= IFNAMSIZ) Die("interface name too long: " + port.name);
  std::strncpy(ifr.ifr_name, port.name.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    Die("TUNSETIFF " + port.name + " in " + path + ": " + std::strerror(errno));
  }
  // Without it the kernel segments to the MTU first: slower, same results.
  if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) != 0) {
    std::fprintf(stderr, "netswitch: no offloads on %s (%s)\n", port.name.c_str(),
                 std::strerror(errno));
  }
  if (setns(home_ns, CLONE_NEWNET) != 0) Die(std::string("setns back: ") + std::strerror(errno));
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Port> ports;
  int64_t delay_ns = 200000, spin_ns = 50000;
  double rate_bps = 10e9;
  std::string ready_file;
  int limit = 10000;
  bool realtime = false, keep_awake = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      if (arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=') return argv[i] + n + 1;
      return nullptr;
    };
    if (const char* v = value("--port")) {
      std::string s = v;
      size_t colon = s.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) {
        Die("--port wants NETNS:IFNAME, got '" + s + "'");
      }
      ports.push_back(Port{s.substr(0, colon), s.substr(colon + 1)});
    } else if (const char* v = value("--delay")) {
      delay_ns = ParseDuration(v);
    } else if (const char* v = value("--rate")) {
      rate_bps = ParseRate(v);
    } else if (const char* v = value("--ready")) {
      ready_file = v;
    } else if (const char* v = value("--limit")) {
      limit = std::atoi(v);
    } else if (const char* v = value("--spin_us")) {
      spin_ns = static_cast<int64_t>(std::atof(v) * 1000);
    } else if (arg == "--realtime") {
      realtime = true;
    } else if (arg == "--keep_awake") {
      keep_awake = true;
    } else {
      Die("unknown argument '" + arg + "' (see the comment at the top of bench/netswitch.cc)");
    }
  }
  if (ports.size() < 2) Die("needs at least two --port");
  if (limit < 1) Die("--limit must be positive");

  prctl(PR_SET_PDEATHSIG, SIGHUP);
  prctl(PR_SET_TIMERSLACK, 1UL);
  if (realtime) {
    sched_param sp{};
    sp.sched_priority = 10;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      std::fprintf(stderr, "netswitch: SCHED_FIFO unavailable (%s); normal priority\n",
                   std::strerror(errno));
    }
  }
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  int sig_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  int timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (sig_fd < 0 || timer_fd < 0 || ep < 0) Die(std::string("setup: ") + std::strerror(errno));

  int home_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home_ns < 0) Die(std::string("cannot open own namespace: ") + std::strerror(errno));
  for (Port& p : ports) p.fd = OpenTapIn(p, home_ns);
  close(home_ns);

  const int kSignal = -1, kTimer = -2;
  auto watch = [&](int fd, int tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(static_cast<int64_t>(tag));
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
      Die(std::string("epoll: ") + std::strerror(errno));
  };
  watch(sig_fd, kSignal);
  watch(timer_fd, kTimer);
  for (size_t i = 0; i < ports.size(); ++i) watch(ports[i].fd, static_cast<int>(i));

  // Idle-priority busy loops, one per allowed CPU (signals stay blocked in them too).
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  cpu_set_t allowed;
  if (keep_awake && sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (!CPU_ISSET(cpu, &allowed)) continue;
      spinners.emplace_back([cpu, &stop] {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        sched_setaffinity(0, sizeof one, &one);
        sched_param idle{};
        sched_setscheduler(0, SCHED_IDLE, &idle);
        while (!stop.load(std::memory_order_relaxed)) __builtin_ia32_pause();
      });
    }
  }
  if (!ready_file.empty()) {
    FILE* f = std::fopen(ready_file.c_str(), "w");
    if (f == nullptr || std::fputs("ready\n", f) < 0 || std::fclose(f) != 0) {
      Die("cannot write " + ready_file);
    }
  }

  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> heap;
  std::unordered_map<uint64_t, int> mac_port;
  uint64_t seq = 0, frames_in = 0, frames_out = 0, bytes_out = 0, dropped = 0, failed = 0;
  int64_t late_sum = 0, late_max = 0;
  const double ns_per_byte = 8e9 / rate_bps;
  auto mac_at = [](const uint8_t* p) {
    uint64_t m = 0;
    for (int i = 0; i < 6; ++i) m = (m << 8) | p[i];
    return m;
  };
  // struct virtio_net_hdr (linux/virtio_net.h, not C++-clean), before every frame both
  // ways; forwarded untouched.
  const size_t kHeader = 10;
  std::vector<uint8_t> buffer(kHeader + 65536 + 1024);

  // Reads every frame waiting on port `in` and schedules its deliveries.
  auto receive = [&](int in) {
    Port& src = ports[in];
    for (int burst = 0; burst < 256; ++burst) {
      ssize_t n = read(src.fd, buffer.data(), buffer.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return;  // EAGAIN (drained) or the interface went away.
      }
      if (n < static_cast<ssize_t>(kHeader) + 14) continue;
      ++frames_in;
      const int64_t now = NowNs();
      const int64_t tx = static_cast<int64_t>((n - kHeader) * ns_per_byte);
      src.in_free = std::max(now, src.in_free) + tx;
      const int64_t arrive = src.in_free + delay_ns;
      const uint8_t* frame = buffer.data() + kHeader;
      if ((frame[6] & 1) == 0) mac_port[mac_at(frame + 6)] = in;
      std::vector<int> outs;
      auto known = mac_port.find(mac_at(frame));
      if ((frame[0] & 1) == 0 && known != mac_port.end()) {
        if (known->second != in) outs.push_back(known->second);
      } else {
        for (int q = 0; q < static_cast<int>(ports.size()); ++q) {
          if (q != in) outs.push_back(q);
        }
      }
      if (outs.empty()) continue;
      auto data = std::make_shared<const std::vector<uint8_t>>(buffer.data(), buffer.data() + n);
      for (int q : outs) {
        Port& dst = ports[q];
        if (dst.queued >= limit) {
          ++dropped;
          continue;
        }
        dst.out_free = std::max(arrive, dst.out_free + tx);
        ++dst.queued;
        heap.push(Pending{dst.out_free, seq++, q, data});
      }
    }
  };

  int64_t armed = -1, wake_late_ewma = 0;
  epoll_event events[64];
  bool running = true;
  while (running) {
    int64_t now = NowNs();
    while (!heap.empty() && heap.top().due <= now) {
      const Pending& p = heap.top();
      Port& dst = ports[p.port];
      --dst.queued;
      if (write(dst.fd, p.frame->data(), p.frame->size()) ==
          static_cast<ssize_t>(p.frame->size())) {
        ++frames_out;
        bytes_out += p.frame->size() - kHeader;
        int64_t late = now - p.due;
        late_sum += late;
        late_max = std::max(late_max, late);
      } else {
        ++failed;  // Interface down (e.g. before the caller brought it up) or full.
      }
      heap.pop();
      now = NowNs();
    }
    int timeout_ms = -1;
    if (!heap.empty()) {
      // Wake early by the recent timer wake-up latency (at most --spin_us), then spin.
      int64_t wake = heap.top().due - std::min(spin_ns, wake_late_ewma + 5000);
      if (wake <= now) {
        timeout_ms = 0;  // Busy-poll the last stretch.
      } else if (wake != armed) {
        itimerspec its{};
        its.it_value.tv_sec = wake / 1000000000;
        its.it_value.tv_nsec = wake % 1000000000;
        timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &its, nullptr);
        armed = wake;
      }
    }
    int n = epoll_wait(ep, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) Die(std::string("epoll_wait: ") + std::strerror(errno));
    for (int i = 0; i < n; ++i) {
      int tag = static_cast<int>(static_cast<int64_t>(events[i].data.u64));
      if (tag == kSignal) {
        running = false;
      } else if (tag == kTimer) {
        uint64_t expirations;
        while (read(timer_fd, &expirations, sizeof expirations) > 0) {
        }
        if (armed >= 0) wake_late_ewma += (NowNs() - armed - wake_late_ewma) / 8;
        armed = -1;
      } else {
        receive(tag);
      }
    }
  }
  stop = true;
  for (std::thread& t : spinners) t.join();
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);  // The forwarding thread, without the busy loops.
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  std::fprintf(
      stderr,
      "netswitch: %llu packets in, %llu out (%llu bytes), %llu dropped (queue "
      "limit), %llu not written (link down); writes late by %.1f us on average, "
      "%.1f us at most; %.2f s of CPU\n",
      static_cast<unsigned long long>(frames_in), static_cast<unsigned long long>(frames_out),
      static_cast<unsigned long long>(bytes_out), static_cast<unsigned long long>(dropped),
      static_cast<unsigned long long>(failed), frames_out ? late_sum / 1e3 / frames_out : 0.0,
      late_max / 1e3, seconds(usage.ru_utime) + seconds(usage.ru_stime));
  return 0;
}
