// The block scheduler of the host model of CUDA (qnb_cuda_host.h declares it): built once
// per process into an object that every kernel library links (build.py), and into one
// linked into each ThreadSanitizer program (tests/cuda_host/racecheck.py, -DQNB_HOST_TSAN).
// Its state is per host thread: two threads launching kernels at once each run their own
// blocks with their own fibers.
//
// Blocks run one after another; within a block every thread is a fiber (ucontext) and
// runs until it reaches __syncthreads() or returns. When no fiber can run, the fibers
// waiting at the barrier are released together (threads that have returned do not count,
// as on the hardware). Phases between barriers alternate the order the threads run in
// (first ascending, then descending, ...), so a missing barrier shows whichever thread's
// write it fails to order.
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <vector>

#include "qnb_cuda_host.h"

// Under QNB_HOST_TSAN (g++ -fsanitize=thread, in a standalone program: racecheck.py) each
// thread is also a ThreadSanitizer fiber, and only a barrier orders one thread's memory
// accesses before another's (its arrivals release, its departures acquire), so TSan
// reports every pair of accesses, to shared or global memory, that no barrier orders.
// The emulation's own bookkeeping is hidden from TSan.
#ifdef QNB_HOST_TSAN
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#define QNB_TSAN(...) __VA_ARGS__
#define QNB_UNTRACKED_BEGIN()                   \
  AnnotateIgnoreReadsBegin(__FILE__, __LINE__); \
  AnnotateIgnoreWritesBegin(__FILE__, __LINE__)
#define QNB_UNTRACKED_END()                   \
  AnnotateIgnoreWritesEnd(__FILE__, __LINE__); \
  AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define QNB_TSAN(...)
#define QNB_UNTRACKED_BEGIN()
#define QNB_UNTRACKED_END()
#endif

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace qnb_host {

enum class State { runnable, waiting, done };

constexpr size_t kStack = 256 * 1024;

struct Block {
  std::vector<ucontext_t> contexts;
  std::vector<void*> stacks;  // mapped, not zero-filled: a page is touched when used
  std::vector<State> states;
  ucontext_t scheduler;
  void (*body)(void*) = nullptr;
  void* context = nullptr;
  unsigned int current = 0;
  long barriers = 0;  // barrier releases, for the harness's report
  std::vector<long> mma_calls;  // per thread: wmma::mma_sync calls in the launch's blocks
#ifdef QNB_HOST_TSAN
  void* tsan_scheduler = nullptr;
  std::vector<void*> tsan_fibers;
  std::vector<unsigned char> parity;  // per thread: barriers passed, mod 2
  char barrier_token[2];              // one per alternate phase (see syncthreads)
  char end_token;                     // every thread's accesses, before the next block
#endif
  ~Block() {  // (a host thread's fibers' stacks go with the thread)
    for (void* stack : stacks) munmap(stack, kStack);
  }
};

Block& block() {
  thread_local Block b;
  return b;
}

void fiber_main() {
  Block& b = block();
  QNB_UNTRACKED_BEGIN();
  void (*body)(void*) = b.body;
  void* context = b.context;
  QNB_UNTRACKED_END();
  body(context);
  QNB_TSAN(__tsan_release(&b.end_token));
  QNB_UNTRACKED_BEGIN();
  b.states[b.current] = State::done;
  QNB_TSAN(void* scheduler = b.tsan_scheduler);
  QNB_UNTRACKED_END();
  QNB_TSAN(__tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync));
  // Back to the scheduler without returning (a return would run this function's exit on
  // the scheduler's side of TSan's shadow stack).
  setcontext(&b.scheduler);
}

long launch(const unsigned int grid[3], unsigned int threads, void (*body)(void*),
            void* context) {
  Block& b = block();
  QNB_TSAN(b.tsan_scheduler = __tsan_get_current_fiber());
  QNB_TSAN(b.tsan_fibers.assign(threads, nullptr));
  QNB_TSAN(b.parity.assign(threads, 0));
  b.body = body;
  b.context = context;
  b.barriers = 0;
  b.mma_calls.assign(threads, 0);
  b.contexts.resize(threads);
  b.states.resize(threads);
  while (b.stacks.size() < threads) {
    void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) abort();
    b.stacks.push_back(stack);
  }
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {threads, 1, 1};
  for (unsigned int z = 0; z < grid[2]; ++z)
    for (unsigned int y = 0; y < grid[1]; ++y)
      for (unsigned int x = 0; x < grid[0]; ++x) {
        blockIdx = {x, y, z};
        for (unsigned int t = 0; t < threads; ++t) {
          ucontext_t& c = b.contexts[t];
          getcontext(&c);
          c.uc_stack.ss_sp = b.stacks[t];
          c.uc_stack.ss_size = kStack;
          c.uc_link = &b.scheduler;
          makecontext(&c, fiber_main, 0);
          b.states[t] = State::runnable;
          // A thread's fiber serves it in every block: the blocks are ordered anyway (each
          // acquires what the one before released), and creating a TSan fiber costs more
          // than the block it runs.
          QNB_TSAN(if (!b.tsan_fibers[t]) b.tsan_fibers[t] = __tsan_create_fiber(0));
          QNB_TSAN(b.parity[t] = 0);
        }
        for (bool reverse = false;; reverse = !reverse) {
          bool waiting = false;
          // Each phase runs the threads in the other order, so that a read of another
          // thread's write that no barrier orders shows up in one of the two.
          for (unsigned int i = 0; i < threads; ++i) {
            const unsigned int t = reverse ? threads - 1 - i : i;
            if (b.states[t] != State::runnable) continue;
            QNB_UNTRACKED_BEGIN();
            b.current = t;
            threadIdx = {t, 0, 0};
            QNB_UNTRACKED_END();
            // Entering a thread orders the scheduler's writes before it; leaving does not
            // order the thread's accesses before anything (only barriers do).
            QNB_TSAN(__tsan_switch_to_fiber(b.tsan_fibers[t], 0));
            swapcontext(&b.scheduler, &b.contexts[t]);
          }
          for (unsigned int t = 0; t < threads; ++t) {
            if (b.states[t] == State::waiting) {
              b.states[t] = State::runnable;
              waiting = true;
            }
          }
          if (!waiting) break;  // every thread has returned
          ++b.barriers;
        }
        QNB_TSAN(__tsan_acquire(&b.end_token));  // the next block comes after this one
      }
  return b.barriers;
}

void syncthreads() {
  Block& b = block();
  QNB_UNTRACKED_BEGIN();
  const unsigned int t = b.current;
  b.states[t] = State::waiting;
#ifdef QNB_HOST_TSAN
  // Arrivals at barrier k release token k % 2 and departures acquire it: a thread that
  // leaves barrier k late must not acquire what another did after barrier k.
  char* token = &b.barrier_token[b.parity[t]];
  b.parity[t] ^= 1;
  void* scheduler = b.tsan_scheduler;
#endif
  QNB_UNTRACKED_END();
  QNB_TSAN(__tsan_release(token));
  QNB_TSAN(__tsan_switch_to_fiber(scheduler, __tsan_switch_to_fiber_no_sync));
  swapcontext(&b.contexts[t], &b.scheduler);
  QNB_TSAN(__tsan_acquire(token));
  QNB_UNTRACKED_BEGIN();
  threadIdx = {t, 0, 0};
  QNB_UNTRACKED_END();
}

void count_mma() {
  QNB_UNTRACKED_BEGIN();
  Block& b = block();
  ++b.mma_calls[b.current];
  QNB_UNTRACKED_END();
}

}  // namespace qnb_host

// The wmma::mma_sync calls thread `thread` of the blocks of the last launch on this host
// thread made (summed over the blocks), or -1 past the block's threads.
extern "C" long qnb_host_mma_calls(unsigned int thread) {
  const qnb_host::Block& b = qnb_host::block();
  return thread < b.mma_calls.size() ? b.mma_calls[thread] : -1;
}
