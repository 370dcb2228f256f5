// Fused Bayes-by-Backprop variational step for MXNet 1.9 (extension library API v11).
//
// Five operators: `gluon_bbb_variational` (below), `gluon_bbb_finite_guard`, `gluon_bbb_adam`,
// `gluon_bbb_sgd` and `gluon_bbb_normal` (at the end of the file).
//
// Operator `gluon_bbb_variational`, over K weight tensors at once:
//
//   inputs   mu_1..mu_K, rho_1..rho_K [, eps_1..eps_K when eps_given=1]
//            [, m_1..m_K, s_1..s_K with prior=diagonal]
//   attributes  num_tensors, prior (gaussian: sigma; mixture: pi, sigma1, sigma2; diagonal: its
//               means m and standard deviations s are inputs), and optional
//               kl (monte_carlo, closed_form), eps_given, return_eps, keep_eps, key
//   outputs  w_1..w_K, complexity (shape (1,)), key (shape (8,)) [, eps_1..eps_K when return_eps=1]
//
//   eps ~ N(0, 1)                     drawn here, counter-based, keyed from MXNet's seed
//   sigma = softplus(rho) = log(1 + exp(rho))
//   w = mu + sigma * eps              (paper, section 3.2, step 2)
//   complexity = sum_j [log q(w_j | theta) - log P(w_j)]      (the bracket of Eq. 8)
//   log q = -log sigma - eps^2 / 2 - log(2 pi) / 2            (reparameterised form)
//   log P: Gaussian N(0, s^2), the scale mixture of Eq. (7), or the per-weight (diagonal)
//          Gaussian N(m_j, s_j^2) of Bayesian updating
//   with kl=closed_form (a Gaussian or diagonal prior), the complexity is instead its expectation
//   under q, KL(q || P) = sum_j [log(s_j / sigma_j) + (sigma_j^2 + (mu_j - m_j)^2) / (2 s_j^2)
//   - 1/2] (m_j = 0 and s_j = s for the Gaussian prior)
//   key: the 64-bit key of the noise, then the id of the draw's kept noise (0 when not kept),
//        each in four 16-bit pieces, exact in float32
//
// eps is not an output unless asked for (the closed form needs it no more than the Monte Carlo
// estimate does), which spares MXNet's zero gradients for it: with keep_eps=1 the forward keeps
// it for its own backward pass (see "the forward's noise, kept"); otherwise, or when the store
// no longer holds it, the backward pass draws it again from the key.
// The backward pass gives d/dmu and d/drho of (the net's loss through w) + g * complexity, and
// with prior=diagonal also d/dm and d/ds of g * complexity (the prior's arrays as inputs).
//
// Determinism: eps_j of tensor t is Philox4x32-10 of the counter (j / 4, t) under a 64-bit key
// (see "normal noise"), with the key drawn from MXNet's seeded CPU random state 0 at each call
// (or given as the attribute key). The weights are cut into chunks of kChunk values, drawn and
// summed on any thread; the chunks' partial sums are added in chunk order. So eps and the
// complexity depend only on the seed, never on the number of threads.
//
// float32 uses branch-free exp/log/sin/cos approximations (about 1-2 ulp) so the loops
// vectorise without -ffast-math; float64 uses the C library.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mxnet/lib_api.h"

#include <memory>
#include <mutex>

using namespace mxnet::ext;

// ------------------------------------------------------------------ error messages
// An operator that fails says why through MX_ERROR_MSG; MXNet reads the messages back through
// _msgSize and _msgGet. lib_api.cc keeps them in a list it never empties, and its _msgGet
// returns a new std::string that MXNet never frees; MXNet reads the whole list after every call
// of every callback, failed or not. So after one error (a shape mismatch, say) every later call
// of any of these operators leaked a copy of every message so far. The messages now go to the
// list below, which _msgGet empties once MXNet has read its last entry (see the end of the
// file, and fused.py for the renames that move lib_api.cc's definitions out of the way).
namespace {

class ErrorMessages {
 public:
  static ErrorMessages& get() {
    static ErrorMessages log;
    return log;
  }

  std::stringstream& add(const char* file, int line) {
    std::lock_guard<std::mutex> hold(mutex_);
    messages_.emplace_back(new std::stringstream());
    *messages_.back() << file << "[" << line << "]: ";
    return *messages_.back();
  }

  int size() {
    std::lock_guard<std::mutex> hold(mutex_);
    return static_cast<int>(messages_.size());
  }

  // Message idx, valid until this thread's next read; reading the last one empties the list.
  const char* read(int idx) {
    thread_local std::string reading;
    std::lock_guard<std::mutex> hold(mutex_);
    if (idx < 0 || idx >= static_cast<int>(messages_.size())) {
      reading.clear();
    } else {
      reading = messages_[idx]->str();
      if (idx + 1 == static_cast<int>(messages_.size())) messages_.clear();
    }
    return reading.c_str();
  }

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<std::stringstream>> messages_;
};

}  // namespace

#undef MX_ERROR_MSG
#define MX_ERROR_MSG ErrorMessages::get().add(__FILE__, __LINE__)

namespace {

constexpr int64_t kChunk = 8192;  // values per chunk of work (a multiple of 4)
constexpr unsigned kKeyOutputSize = 8;  // the noise's key and the draw id, 4 pieces each

// ------------------------------------------------------------------ float32 math
inline float bits_to_float(uint32_t bits) { float f; std::memcpy(&f, &bits, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float exp_(float x) {  // Cephes-style expf; x clamped to [-86, 88]
  x = x < -86.0f ? -86.0f : (x > 88.0f ? 88.0f : x);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t shift = static_cast<int32_t>(n) << 23;
  return bits_to_float(float_to_bits(p) + static_cast<uint32_t>(shift));
}

inline float log_(float x) {  // Cephes-style logf for positive normal x
  const uint32_t bits = float_to_bits(x);
  int32_t e = static_cast<int32_t>(bits >> 23) - 127;
  float m = bits_to_float((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  const bool big = m > 1.41421356237f;
  m = big ? 0.5f * m : m;
  e = big ? e + 1 : e;
  const float f = m - 1.0f;
  const float z = f * f;
  float y = 7.0376836292e-2f;
  y = y * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  const float fe = static_cast<float>(e);
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return f + y + 0.693359375f * fe;
}

inline float log1p_(float x) {  // x >= 0; exact-ratio trick keeps tiny x accurate
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  return d == 0.0f ? x : log_(u) * (x / d);
}

// log(1 + x) for 0 <= x <= 1 to an absolute error of about 6e-8 (float32: the log of the rounded
// sum, without log1p_'s division). Enough where it is added to a term of size >= 1/2, as in the
// mixture's log-sum-exp, whose float32 result is rounded more coarsely than that anyway.
inline float log1p_abs_(float x) { return log_(1.0f + x); }

inline double exp_(double x) { return std::exp(x); }
inline double log_(double x) { return std::log(x); }
inline double log1p_(double x) { return std::log1p(x); }
inline double log1p_abs_(double x) { return std::log1p(x); }

template <typename T>
inline T softplus(T rho) {  // max(rho, 0) + log1p(exp(-|rho|))
  const T a = rho < T(0) ? -rho : rho;
  return (rho > T(0) ? rho : T(0)) + log1p_(exp_(-a));
}

// sigma = softplus(rho) and d sigma / d rho = sigmoid(rho) from one exp(-|rho|) (the backward
// passes' pair; bit for bit softplus(rho) and sigmoid(rho)).
template <typename T>
inline void softplus_and_sigmoid(T rho, T* sigma, T* dsigma_drho) {
  const T e = exp_(rho < T(0) ? rho : -rho);
  *sigma = (rho > T(0) ? rho : T(0)) + log1p_(e);
  const T inv = T(1) / (T(1) + e);
  *dsigma_drho = rho < T(0) ? e * inv : inv;
}

template <typename T>
inline T sigmoid(T rho) {
  const T e = exp_(rho < T(0) ? rho : -rho);  // exp(-|rho|)
  const T inv = T(1) / (T(1) + e);
  return rho < T(0) ? e * inv : inv;
}

// ------------------------------------------------------------------ priors
struct Prior {
  bool mixture = false;
  bool diagonal = false;  // per-weight means and standard deviations, given as inputs
  // Gaussian: log P(w) = c1 - k1 w^2. Mixture: log(exp(c1 - k1 w^2) + exp(c2 - k2 w^2)).
  double c1 = 0, k1 = 0, c2 = 0, k2 = 0;
};

template <typename T, bool Mixture>
struct PriorT {
  T c1, k1, c2, k2;
  T s;  // the Gaussian's standard deviation, sqrt(1 / (2 k1)) (the closed-form KL's)
  explicit PriorT(const Prior& p)
      : c1(T(p.c1)), k1(T(p.k1)), c2(T(p.c2)), k2(T(p.k2)),
        s(T(p.k1 > 0 ? std::sqrt(0.5 / p.k1) : 0.0)) {}

  // log P(w) without the -log(2 pi)/2 constant.
  inline T log_prob(T w) const {
    const T w2 = w * w;
    const T a = c1 - k1 * w2;
    if (!Mixture) return a;
    const T b = c2 - k2 * w2;
    const T hi = a > b ? a : b;
    const T gap = a > b ? b - a : a - b;  // -|a - b|
    return hi + log1p_abs_(exp_(gap));
  }

  // d log P(w) / dw.
  inline T grad(T w) const {
    if (!Mixture) return T(-2) * k1 * w;
    const T w2 = w * w;
    const T r1 = sigmoid((c1 - k1 * w2) - (c2 - k2 * w2));  // responsibility of component 1
    return T(-2) * w * (r1 * k1 + (T(1) - r1) * k2);
  }

  // log_prob(w) and grad(w), bit for bit, from one exponential (the mixture's).
  inline T log_prob_and_grad(T w, T* g) const {
    const T w2 = w * w;
    const T a = c1 - k1 * w2;
    if (!Mixture) {
      *g = T(-2) * k1 * w;
      return a;
    }
    const T b = c2 - k2 * w2;
    const T d = a - b;
    const T e = exp_(d < T(0) ? d : -d);  // exp(-|a - b|), log_prob's and sigmoid(d)'s
    const T inv = T(1) / (T(1) + e);
    const T r1 = d < T(0) ? e * inv : inv;
    *g = T(-2) * w * (r1 * k1 + (T(1) - r1) * k2);
    return (a > b ? a : b) + log1p_abs_(e);
  }
};

// ------------------------------------------------------------------ normal noise
// Counter-based noise: value j of tensor t under a key is a pure function of (key, t, j), so
// any chunk can be drawn on any thread, in any order, and vectorised. The generator is
// Philox4x32-10 (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as 1, 2,
// 3"): ten rounds of a bijection of a 128-bit counter under a 64-bit key, which pass TestU01's
// BigCrush. Counter (block, t, 0) with block = j / 4 (float32) or j / 2 (float64); the four
// 32-bit words of a block make two Box-Muller pairs (float32, 24-bit uniforms) or one (float64,
// 53-bit uniforms).
struct Key {
  uint32_t k0 = 0, k1 = 0;
};

// A fresh key per call from MXNet's seeded CPU random state 0 (two draws), so mx.random.seed
// reproduces every later call; or the key given as the operator's attribute.
inline Key draw_key(mx_cpu_rand_t* states) {
  Key key;
  key.k0 = static_cast<uint32_t>(states[0]());
  key.k1 = static_cast<uint32_t>(states[0]());
  return key;
}

struct Block {
  uint32_t x0, x1, x2, x3;
};

inline Block philox4x32_10(uint64_t block, uint32_t tensor, Key key) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = tensor, c3 = 0u;
  uint32_t k0 = key.k0, k1 = key.k1;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;  // the Weyl sequence of the key schedule
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

inline float open_uniform24(uint32_t x) {  // (0, 1]
  return static_cast<float>((x >> 8) + 1u) * 5.9604644775390625e-8f;
}
inline float uniform24(uint32_t x) {  // [0, 1)
  return static_cast<float>(x >> 8) * 5.9604644775390625e-8f;
}
inline double uniform53(uint32_t a, uint32_t b) {  // [0, 1) with 53 random bits
  const uint64_t hi = a >> 5, lo = b >> 6;
  return static_cast<double>((hi << 26) | lo) * 1.1102230246251565e-16;
}

// Box-Muller with the angle 2 pi u2 split into a quadrant and an offset in [-pi/4, pi/4):
// polynomial sin/cos there are accurate to 2e-9. The angle is still uniform on the circle.
inline void box_muller(float u1, float u2, float* z0, float* z1) {
  const float r = std::sqrt(-2.0f * log_(u1));
  const float t = 4.0f * u2;
  const float quadrant = std::floor(t);
  const float a = (t - quadrant - 0.5f) * 1.57079632679489662f;
  const float a2 = a * a;
  const float s = a * (1.0f + a2 * (-1.6666667163e-1f + a2 * (8.3333337680e-3f +
                  a2 * (-1.9841270114e-4f + a2 * 2.7557314297e-6f))));
  const float c = 1.0f + a2 * (-0.5f + a2 * (4.1666667908e-2f + a2 * (-1.3888889225e-3f +
                  a2 * (2.4801587642e-5f - a2 * 2.7557314297e-7f))));
  const int q = static_cast<int>(quadrant);
  const float cq = q == 0 ? c : (q == 1 ? -s : (q == 2 ? -c : s));
  const float sq = q == 0 ? s : (q == 1 ? c : (q == 2 ? -s : -c));
  *z0 = r * cq;
  *z1 = r * sq;
}

inline void box_muller(double u1, double u2, double* z0, double* z1) {
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.28318530717958647692 * u2;
  *z0 = r * std::cos(theta);
  *z1 = r * std::sin(theta);
}

// Fills eps[0, n) with the normals begin .. begin + n - 1 of tensor `tensor` under `key`, for
// n <= kChunk and begin a multiple of kChunk (so of 4); u1 and u2 hold kChunk / 2 values each.
inline void fill_normal(Key key, uint32_t tensor, int64_t begin, float* eps, int64_t n,
                        float* u1, float* u2) {
  const int64_t first = begin / 4, blocks = (n + 3) / 4;
#pragma omp simd
  for (int64_t i = 0; i < blocks; ++i) {
    const Block b = philox4x32_10(static_cast<uint64_t>(first + i), tensor, key);
    u1[2 * i] = open_uniform24(b.x0);
    u2[2 * i] = uniform24(b.x1);
    u1[2 * i + 1] = open_uniform24(b.x2);
    u2[2 * i + 1] = uniform24(b.x3);
  }
  const int64_t pairs = (n + 1) / 2;
#pragma omp simd
  for (int64_t i = 0; i < pairs; ++i) box_muller(u1[i], u2[i], &u1[i], &u2[i]);
  for (int64_t i = 0; i < n / 2; ++i) {
    eps[2 * i] = u1[i];
    eps[2 * i + 1] = u2[i];
  }
  if (n % 2) eps[n - 1] = u1[pairs - 1];
}

inline void fill_normal(Key key, uint32_t tensor, int64_t begin, double* eps, int64_t n,
                        double* u1, double* u2) {
  const int64_t first = begin / 2, pairs = (n + 1) / 2;
#pragma omp simd
  for (int64_t i = 0; i < pairs; ++i) {
    const Block b = philox4x32_10(static_cast<uint64_t>(first + i), tensor, key);
    u1[i] = 1.0 - uniform53(b.x0, b.x1);  // (0, 1]
    u2[i] = uniform53(b.x2, b.x3);
  }
  for (int64_t i = 0; i < pairs; ++i) box_muller(u1[i], u2[i], &u1[i], &u2[i]);
  for (int64_t i = 0; i < n / 2; ++i) {
    eps[2 * i] = u1[i];
    eps[2 * i + 1] = u2[i];
  }
  if (n % 2) eps[n - 1] = u1[pairs - 1];
}

// ------------------------------------------------------------------ the forward's noise, kept
// The backward pass needs the forward's eps. Drawing it again from the key runs the generator
// and Box-Muller a second time; keeping it costs a write and a read of it. With keep_eps=1 (the
// training step, while autograd records), the forward writes its eps (and the mixture's
// d log P / dw, which depends on w, not only on the key) into a slot of this store, under a
// draw id of its own: a number no other draw of the process has, from a 64-bit counter, which
// the forward writes into its key output. The backward pass of a keep_eps=1 draw reads the id
// from that output (MXNet hands every backward pass its own forward's outputs) and takes the
// slot only if the slot still holds that id, and the same key, dtype, layout and sizes;
// otherwise (the slot was taken by a later draw) it draws eps again, which gives the same values
// bit for bit. So a slot is read by the backward pass of the forward that filled it, and by no
// other: not by another draw under the same key (a given key, or mx.random.seed before each of
// two networks), nor by a draw of another dtype, nor by a keep_eps=0 draw, which never looks.
//
// Memory: at most kSlots buffers, each the size of the draw it holds (a buffer is reused only
// by a draw of its own byte count, else allocated afresh): per weight, 4 bytes for float32 with
// the Gaussian prior or the closed-form KL, 8 for float32 with the scale mixture or float64
// with the Gaussian prior, 16 for float64 with the scale mixture. A draw takes a free slot (its
// backward pass has read it, which frees it, or it was never used): one whose buffer has its
// byte count, else one never used, else any; else the slot filled longest ago. So a step of one
// sample reuses one buffer (warm in the cache), a step of S samples S of them, and networks of
// other sizes trained in turn keep a buffer each. A slot whose backward pass never runs stays
// taken, its buffer held and read by no one, until a draw finds no free slot and takes it as
// the oldest; the buffers stay allocated, for reuse, until the process ends. A buffer that a
// backward pass is reading while a draw takes its slot (a shared_ptr held elsewhere) is never
// written: the draw allocates a new one, and the old one is freed when that backward pass
// ends. So the store holds at most kSlots buffers, and for a moment one more per backward pass
// still reading. Draws over kMaxBytes are not kept.
class NoiseStore {
 public:
  static constexpr int kSlots = 4;         // two samples a step and their backward passes
  static constexpr size_t kMaxBytes = size_t(1) << 30;  // larger draws are drawn twice instead

  using Buffer = std::vector<unsigned char>;

  // What a kept buffer holds, besides its id: the noise's key, the element type (sizeof T),
  // whether d log P / dw follows eps, and the tensors' sizes.
  struct Contents {
    Key key;
    int element_bytes = 0;
    bool prior_grad = false;
    std::vector<int64_t> sizes;
    size_t bytes = 0;

    bool operator==(const Contents& o) const {
      return key.k0 == o.key.k0 && key.k1 == o.key.k1 && element_bytes == o.element_bytes &&
             prior_grad == o.prior_grad && bytes == o.bytes && sizes == o.sizes;
    }
  };

  static NoiseStore& get() {
    static NoiseStore store;
    return store;
  }

  // A buffer of contents.bytes to write a draw into, its draw id (never 0) and the slot to mark
  // complete once it is written; nullptr (and id 0, slot -1) when the draw is too large to keep.
  std::shared_ptr<Buffer> to_write(const Contents& contents, uint64_t* id, int* slot) {
    *id = 0;
    *slot = -1;
    if (contents.bytes > kMaxBytes) return nullptr;
    std::lock_guard<std::mutex> hold(mutex_);
    int pick = -1;
    for (int i = 0; i < kSlots && pick < 0; ++i)  // a free slot whose buffer fits exactly
      if (slots_[i].id == 0 && slots_[i].buffer && slots_[i].buffer->size() == contents.bytes)
        pick = i;
    for (int i = 0; i < kSlots && pick < 0; ++i)  // else one never used
      if (!slots_[i].buffer) pick = i;
    if (pick < 0) {  // else a free slot (id 0), else the one filled longest ago
      pick = 0;
      for (int i = 1; i < kSlots; ++i)
        if (slots_[i].id < slots_[pick].id) pick = i;
    }
    Slot& chosen = slots_[pick];
    if (!chosen.buffer || chosen.buffer.use_count() > 1 || chosen.buffer->size() != contents.bytes)
      chosen.buffer = std::make_shared<Buffer>(contents.bytes);
    chosen.contents = contents;
    chosen.id = ++last_id_;
    chosen.complete = false;
    *id = chosen.id;
    *slot = pick;
    return chosen.buffer;
  }

  // Marks the slot's buffer complete, unless another draw has taken the slot meanwhile.
  void mark_complete(int slot, uint64_t id) {
    if (slot < 0) return;
    std::lock_guard<std::mutex> hold(mutex_);
    if (slots_[slot].id == id) slots_[slot].complete = true;
  }

  // The complete buffer of draw `id`, if a slot still holds it with these contents, or nullptr.
  // The slot is freed (the backward pass holds the buffer until it has read it): the next draw's
  // first choice.
  std::shared_ptr<Buffer> take(uint64_t id, const Contents& contents) {
    if (id == 0) return nullptr;
    std::lock_guard<std::mutex> hold(mutex_);
    for (Slot& slot : slots_) {
      if (slot.id == id && slot.complete && slot.contents == contents) {
        slot.id = 0;
        slot.complete = false;
        return slot.buffer;
      }
    }
    return nullptr;
  }

 private:
  struct Slot {
    uint64_t id = 0;  // the draw it holds (ids grow with time); 0: free
    Contents contents;
    bool complete = false;
    std::shared_ptr<Buffer> buffer;
  };
  std::mutex mutex_;
  Slot slots_[kSlots];
  uint64_t last_id_ = 0;  // the process's last draw id; 2^64 draws never wrap it
};

// Where each tensor's values start in a buffer holding all K tensors one after the other.
std::vector<int64_t> offsets_of(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> offsets(sizes.size(), 0);
  for (size_t t = 1; t < sizes.size(); ++t) offsets[t] = offsets[t - 1] + sizes[t - 1];
  return offsets;
}

// ------------------------------------------------------------------ chunks
struct Chunk {
  int tensor;
  int64_t begin, size;
};

std::vector<Chunk> make_chunks(const std::vector<int64_t>& sizes) {
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int64_t b = 0; b < sizes[t]; b += kChunk)
      chunks.push_back({static_cast<int>(t), b, std::min(kChunk, sizes[t] - b)});
  return chunks;
}

int num_threads_for(size_t work_items) {
#ifdef _OPENMP
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(omp_get_max_threads(), work_items)));
#else
  return 1;
#endif
}

// sum_j [-log sigma_j - eps_j^2 / 2 - log P(w_j)] over one chunk, also writing w, and
// d log P / dw into prior_grad when it is given (the mixture's, kept for the backward pass).
template <typename T, bool Mixture>
double forward_chunk(const PriorT<T, Mixture>& prior, const T* mu, const T* rho, const T* eps, T* w,
                     int64_t n, T* prior_grad = nullptr) {
  T log_q = T(0), log_p = T(0);
#pragma omp simd reduction(+ : log_q)
  for (int64_t i = 0; i < n; ++i) {
    const T sigma = softplus(rho[i]);
    w[i] = mu[i] + sigma * eps[i];
    log_q += -log_(sigma) - T(0.5) * eps[i] * eps[i];
  }
  // log P in a loop of its own, over w just written (in the cache): two short loops vectorise
  // better than one long one.
  if (prior_grad) {
#pragma omp simd reduction(+ : log_p)
    for (int64_t i = 0; i < n; ++i) log_p += prior.log_prob_and_grad(w[i], &prior_grad[i]);
  } else {
#pragma omp simd reduction(+ : log_p)
    for (int64_t i = 0; i < n; ++i) log_p += prior.log_prob(w[i]);
  }
  return static_cast<double>(log_q) - static_cast<double>(log_p);
}

// (r^2 - 1) / 2 - log r with r = sigma / s: the part of KL(N(mu, sigma^2) || N(0, s^2)) that
// depends on the standard deviations (gluon_bbb._math.kl_normal_scales, the same formula). Near
// r = 1 the textbook form cancels, so there, with u = (sigma - s) / (sigma + s) (exact to
// rounding), r = (1 + u) / (1 - u) and log r = 2 atanh(u):
//   2 u^2 (2 - u) / (1 - u)^2 - 2 (u^3/3 + u^5/5 + ... + u^15/15)   for |u| < 0.1;
// elsewhere t (t + 2) / 2 - log(sigma / s) with t = (sigma - s) / s.
template <typename T>
inline T kl_scales(T sigma, T s, T inv_s) {
  const T difference = sigma - s;
  const T u = difference / (sigma + s);
  const T uc = u < T(-0.5) ? T(-0.5) : (u > T(0.5) ? T(0.5) : u);
  const T v = uc * uc;
  T series = T(1) / T(15);
  series = T(1) / T(13) + v * series;
  series = T(1) / T(11) + v * series;
  series = T(1) / T(9) + v * series;
  series = T(1) / T(7) + v * series;
  series = T(1) / T(5) + v * series;
  series = T(1) / T(3) + v * series;
  const T one_minus = T(1) - uc;
  const T near = T(2) * v * (T(2) - uc) / (one_minus * one_minus) - T(2) * uc * v * series;
  const T t = difference * inv_s;
  const T far = T(0.5) * t * (t + T(2)) - log_(sigma * inv_s);
  return (u < T(0.1) && u > T(-0.1)) ? near : far;
}

// sum_j [(r_j^2 - 1) / 2 - log r_j + k1 mu_j^2] over one chunk, also writing w: the closed-form
// KL to the Gaussian prior N(0, s^2), k1 = 1/(2 s^2), r_j = sigma_j / s.
template <typename T>
double kl_forward_chunk(const PriorT<T, false>& prior, const T* mu, const T* rho, const T* eps,
                        T* w, int64_t n) {
  const T s = prior.s, inv_s = T(1) / prior.s;
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    const T sigma = softplus(rho[i]);
    w[i] = mu[i] + sigma * eps[i];
    acc += kl_scales(sigma, s, inv_s) + prior.k1 * mu[i] * mu[i];
  }
  return static_cast<double>(acc);
}

// The closed form's backward: d KL / d mu = 2 k1 mu, d KL / d sigma = 2 k1 sigma - 1 / sigma,
// written (sigma - s)(sigma + s) 2 k1 / sigma so that it does not cancel near sigma = s.
template <typename T>
void kl_backward_chunk(const PriorT<T, false>& prior, T g_complexity, const T* g_w, const T* mu,
                       const T* rho, const T* eps, T* g_mu, T* g_rho, int64_t n) {
  const T two_k1 = T(2) * prior.k1, s = prior.s;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T sigma, dsigma_drho;
    softplus_and_sigmoid(rho[i], &sigma, &dsigma_drho);
    const T gw = g_w ? g_w[i] : T(0);
    g_mu[i] = gw + g_complexity * two_k1 * mu[i];
    g_rho[i] = dsigma_drho * (gw * eps[i] + g_complexity * ((sigma - s) * (sigma + s) * two_k1 /
                                                           sigma));
  }
}

// The per-weight (diagonal) prior N(m_j, s_j^2), its arrays read alongside mu and rho.
// Monte Carlo: sum_j [log(s_j / sigma_j) - eps_j^2 / 2 + z_j^2 / 2], z = (w - m) / s, over one
// chunk, also writing w (log q - log P with the -log(2 pi)/2 of each cancelled).
template <typename T>
double diag_forward_chunk(const T* mu, const T* rho, const T* eps, const T* m, const T* s, T* w,
                          int64_t n) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    const T sigma = softplus(rho[i]);
    const T wi = mu[i] + sigma * eps[i];
    w[i] = wi;
    const T z = (wi - m[i]) / s[i];
    acc += log_(s[i] / sigma) + T(0.5) * (z * z - eps[i] * eps[i]);
  }
  return static_cast<double>(acc);
}

// Its backward: d log P / dw = -(w - m) / s^2, so
//   d/dmu = g_w + g (w - m) / s^2,  d/dsigma = g_w eps + g (-1/sigma + eps (w - m) / s^2),
//   d/dm = -g (w - m) / s^2,        d/ds = g (1 - z^2) / s.
template <typename T>
void diag_backward_chunk(T g_complexity, const T* g_w, const T* rho, const T* eps, const T* w,
                         const T* m, const T* s, T* g_mu, T* g_rho, T* g_m, T* g_s, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T sigma, dsigma_drho;
    softplus_and_sigmoid(rho[i], &sigma, &dsigma_drho);
    const T inv_s = T(1) / s[i];
    const T z = (w[i] - m[i]) * inv_s;
    const T pull = g_complexity * z * inv_s;  // g (w - m) / s^2 = -g d log P / dw
    const T gw = g_w ? g_w[i] : T(0);
    g_mu[i] = gw + pull;
    g_rho[i] = dsigma_drho * (gw * eps[i] + g_complexity * (-T(1) / sigma) + pull * eps[i]);
    g_m[i] = -pull;
    g_s[i] = g_complexity * (T(1) - z * z) * inv_s;
  }
}

// Closed form: sum_j [(r_j^2 - 1) / 2 - log r_j + d_j^2 / 2], r = sigma / s, d = (mu - m) / s,
// over one chunk, also writing w.
template <typename T>
double diag_kl_forward_chunk(const T* mu, const T* rho, const T* eps, const T* m, const T* s,
                             T* w, int64_t n) {
  T acc = T(0);
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) {
    const T sigma = softplus(rho[i]);
    w[i] = mu[i] + sigma * eps[i];
    const T inv_s = T(1) / s[i];
    const T d = (mu[i] - m[i]) * inv_s;
    acc += kl_scales(sigma, s[i], inv_s) + T(0.5) * d * d;
  }
  return static_cast<double>(acc);
}

// Its backward: d KL / d mu = d / s, d KL / d sigma = (sigma - s)(sigma + s) / (s^2 sigma),
// d KL / d m = -d / s, d KL / d s = ((s - sigma)(s + sigma) / s^2 - d^2) / s.
template <typename T>
void diag_kl_backward_chunk(T g_complexity, const T* g_w, const T* mu, const T* rho,
                            const T* eps, const T* m, const T* s, T* g_mu, T* g_rho, T* g_m,
                            T* g_s, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T sigma, dsigma_drho;
    softplus_and_sigmoid(rho[i], &sigma, &dsigma_drho);
    const T inv_s = T(1) / s[i];
    const T d = (mu[i] - m[i]) * inv_s;
    const T gw = g_w ? g_w[i] : T(0);
    const T spread = (sigma - s[i]) * (sigma + s[i]) * inv_s * inv_s;  // r^2 - 1
    g_mu[i] = gw + g_complexity * d * inv_s;
    g_rho[i] = dsigma_drho * (gw * eps[i] + g_complexity * spread / sigma);
    g_m[i] = -g_complexity * d * inv_s;
    g_s[i] = -g_complexity * (spread + d * d) * inv_s;
  }
}

// prior_grad: d log P / dw as the forward kept it, or nullptr to compute it from w.
template <typename T, bool Mixture, bool PriorGradGiven>
void backward_chunk(const PriorT<T, Mixture>& prior, T g_complexity, const T* g_w, const T* rho,
                    const T* eps, const T* w, const T* prior_grad, T* g_mu, T* g_rho, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T sigma, dsigma_drho;
    softplus_and_sigmoid(rho[i], &sigma, &dsigma_drho);
    const T dlogp_dw = PriorGradGiven ? prior_grad[i] : prior.grad(w[i]);
    const T gw = g_w ? g_w[i] : T(0);
    g_mu[i] = gw - g_complexity * dlogp_dw;
    // d sigma / d rho = sigmoid(rho); d complexity / d sigma = -1/sigma - dlogp_dw * eps
    g_rho[i] = dsigma_drho * (gw * eps[i] + g_complexity * (-T(1) / sigma - dlogp_dw * eps[i]));
  }
}

// ------------------------------------------------------------------ attributes
struct Attrs {
  int num_tensors = 0;
  bool eps_given = false;
  bool return_eps = true;
  bool key_given = false;
  bool closed_form = false;  // kl=closed_form: the complexity is KL(q || P) (Gaussian prior)
  bool keep_eps = false;     // keep the drawn eps for the backward pass (see NoiseStore)
  Key key;
  Prior prior;
};

bool get_double(const std::unordered_map<std::string, std::string>& attrs, const char* key,
                double* out) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return false;
  try {
    size_t used = 0;
    *out = std::stod(it->second, &used);
    return used == it->second.size();
  } catch (...) {
    return false;
  }
}

// The optional attribute key: the generator's 64-bit key as a decimal integer, instead of a
// key drawn from MXNet's random state.
MXReturnValue parse_key(const std::unordered_map<std::string, std::string>& attrs, bool* given,
                        Key* key, const char* op) {
  auto it = attrs.find("key");
  *given = it != attrs.end();
  if (!*given) return MX_SUCCESS;
  const std::string& text = it->second;
  uint64_t value = 0;
  bool ok = !text.empty() && text.size() <= 20;
  for (char ch : text) ok = ok && ch >= '0' && ch <= '9';
  if (ok) {
    try {
      size_t used = 0;
      value = std::stoull(text, &used);
      ok = used == text.size();
    } catch (...) {
      ok = false;
    }
  }
  if (!ok) {
    MX_ERROR_MSG << op << ": attribute key must be an integer in [0, 2^64), got '" << text << "'";
    return MX_FAIL;
  }
  key->k0 = static_cast<uint32_t>(value);
  key->k1 = static_cast<uint32_t>(value >> 32);
  return MX_SUCCESS;
}

MXReturnValue parse_count(const std::unordered_map<std::string, std::string>& attrs, int* k,
                          const char* op) {
  double value = 0;
  if (!get_double(attrs, "num_tensors", &value) || value < 1 || value != std::floor(value)) {
    MX_ERROR_MSG << op << ": attribute num_tensors must be a positive integer";
    return MX_FAIL;
  }
  *k = static_cast<int>(value);
  return MX_SUCCESS;
}

MXReturnValue parse(const std::unordered_map<std::string, std::string>& attrs, Attrs* out) {
  if (parse_count(attrs, &out->num_tensors, "gluon_bbb_variational") != MX_SUCCESS) return MX_FAIL;
  double eps_given = 0;
  if (get_double(attrs, "eps_given", &eps_given)) out->eps_given = eps_given != 0;
  double return_eps = 1;
  if (get_double(attrs, "return_eps", &return_eps)) out->return_eps = return_eps != 0;
  double keep_eps = 0;
  if (get_double(attrs, "keep_eps", &keep_eps)) out->keep_eps = keep_eps != 0;
  if (parse_key(attrs, &out->key_given, &out->key, "gluon_bbb_variational") != MX_SUCCESS)
    return MX_FAIL;
  auto prior = attrs.find("prior");
  const std::string kind = prior == attrs.end() ? "" : prior->second;
  if (kind == "gaussian") {
    double sigma = 0;
    if (!get_double(attrs, "sigma", &sigma) || !(sigma > 0) || !std::isfinite(sigma)) {
      MX_ERROR_MSG << "gluon_bbb_variational: Gaussian prior needs a positive finite sigma";
      return MX_FAIL;
    }
    out->prior.mixture = false;
    out->prior.c1 = -std::log(sigma);
    out->prior.k1 = 0.5 / (sigma * sigma);
  } else if (kind == "mixture") {
    double pi = 0, s1 = 0, s2 = 0;
    if (!get_double(attrs, "pi", &pi) || !get_double(attrs, "sigma1", &s1) ||
        !get_double(attrs, "sigma2", &s2) || !(pi > 0 && pi < 1) || !(s1 > 0) || !(s2 > 0) ||
        !std::isfinite(s1) || !std::isfinite(s2)) {
      MX_ERROR_MSG << "gluon_bbb_variational: mixture prior needs 0 < pi < 1, sigma1 > 0, sigma2 > 0";
      return MX_FAIL;
    }
    out->prior.mixture = true;
    out->prior.c1 = std::log(pi) - std::log(s1);
    out->prior.k1 = 0.5 / (s1 * s1);
    out->prior.c2 = std::log1p(-pi) - std::log(s2);
    out->prior.k2 = 0.5 / (s2 * s2);
  } else if (kind == "diagonal") {
    out->prior.diagonal = true;
  } else {
    MX_ERROR_MSG << "gluon_bbb_variational: attribute prior must be 'gaussian', 'mixture' or "
                 << "'diagonal'";
    return MX_FAIL;
  }
  auto kl = attrs.find("kl");
  const std::string estimator = kl == attrs.end() ? "monte_carlo" : kl->second;
  if (estimator == "closed_form") {
    if (out->prior.mixture) {
      MX_ERROR_MSG << "gluon_bbb_variational: kl=closed_form needs a Gaussian or diagonal prior";
      return MX_FAIL;
    }
    out->closed_form = true;
  } else if (estimator != "monte_carlo") {
    MX_ERROR_MSG << "gluon_bbb_variational: attribute kl must be 'monte_carlo' or 'closed_form'";
    return MX_FAIL;
  }
  return MX_SUCCESS;
}

// The forward's inputs: mu, rho [, eps] [, m, s], num_tensors each.
int prior_input0(const Attrs& a) { return (a.eps_given ? 3 : 2) * a.num_tensors; }
int num_inputs(const Attrs& a) { return prior_input0(a) + (a.prior.diagonal ? 2 : 0) * a.num_tensors; }

MXReturnValue parse_attrs(const std::unordered_map<std::string, std::string>& attrs,
                          int* num_in, int* num_out) {
  Attrs a;
  if (parse(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  *num_in = num_inputs(a);
  *num_out = (a.return_eps ? 2 : 1) * a.num_tensors + 2;
  return MX_SUCCESS;
}

// Every input and output shares the first input's dtype, float32 or float64.
MXReturnValue same_dtype_as_first(const std::unordered_map<std::string, std::string>& attrs,
                                  std::vector<int>* in_types, std::vector<int>* out_types) {
  const int dtype = in_types->at(0);
  if (dtype != kFloat32 && dtype != kFloat64) {
    MX_ERROR_MSG << "gluon_bbb: inputs must be float32 or float64";
    return MX_FAIL;
  }
  for (auto& t : *in_types) {
    if (t != dtype) {
      MX_ERROR_MSG << "gluon_bbb: all inputs must share one dtype";
      return MX_FAIL;
    }
  }
  for (auto& t : *out_types) t = dtype;
  return MX_SUCCESS;
}

MXReturnValue infer_shape(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<std::vector<unsigned int>>* in_shapes,
                          std::vector<std::vector<unsigned int>>* out_shapes) {
  Attrs a;
  if (parse(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  const int k = a.num_tensors;
  for (int t = 0; t < k; ++t) {
    const auto& mu = in_shapes->at(t);
    for (int group = 1; group < (a.eps_given ? 3 : 2); ++group) {
      if (in_shapes->at(group * k + t) != mu) {
        MX_ERROR_MSG << "gluon_bbb_variational: tensor " << t << ": "
                     << (group == 1 ? "rho" : "eps") << " and mu have different shapes";
        return MX_FAIL;
      }
    }
    if (a.prior.diagonal) {
      for (int group = 0; group < 2; ++group) {
        if (in_shapes->at(prior_input0(a) + group * k + t) != mu) {
          MX_ERROR_MSG << "gluon_bbb_variational: tensor " << t << ": the prior's "
                       << (group == 0 ? "means" : "standard deviations")
                       << " and mu have different shapes";
          return MX_FAIL;
        }
      }
    }
    out_shapes->at(t) = mu;
    if (a.return_eps) out_shapes->at(k + 2 + t) = mu;
  }
  out_shapes->at(k) = {1};
  out_shapes->at(k + 1) = {kKeyOutputSize};
  return MX_SUCCESS;
}

// The key output: the noise's 64-bit key, then the draw id of its kept noise (0: not kept),
// each as four 16-bit pieces (exact in float32 and float64); and back.
template <typename T>
void write_pieces(uint64_t value, T* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<T>((value >> (16 * i)) & 0xFFFFu);
}

template <typename T>
uint64_t read_pieces(const T* in) {
  uint64_t value = 0;
  for (int i = 0; i < 4; ++i) value |= static_cast<uint64_t>(in[i]) << (16 * i);
  return value;
}

template <typename T>
void write_key(Key key, uint64_t draw_id, T* out) {
  write_pieces((static_cast<uint64_t>(key.k1) << 32) | key.k0, out);
  write_pieces(draw_id, out + 4);
}

template <typename T>
Key read_key(const T* in) {
  const uint64_t value = read_pieces(in);
  Key key;
  key.k0 = static_cast<uint32_t>(value);
  key.k1 = static_cast<uint32_t>(value >> 32);
  return key;
}

template <typename T>
uint64_t read_draw_id(const T* in) {
  return read_pieces(in + 4);
}

// What a kept draw of these tensors holds: eps, and the mixture's d log P / dw after it.
template <typename T, bool Mixture, bool ClosedForm>
NoiseStore::Contents kept_contents(Key key, const std::vector<int64_t>& sizes, int64_t total) {
  NoiseStore::Contents contents;
  contents.key = key;
  contents.element_bytes = static_cast<int>(sizeof(T));
  contents.prior_grad = Mixture && !ClosedForm;
  contents.sizes = sizes;
  contents.bytes = static_cast<size_t>(total) * sizeof(T) * (contents.prior_grad ? 2 : 1);
  return contents;
}

template <typename T, bool Mixture, bool ClosedForm, bool Diagonal = false>
MXReturnValue forward_typed(const Attrs& a, std::vector<MXTensor>* inputs,
                            std::vector<MXTensor>* outputs, const OpResource& res) {
  const int k = a.num_tensors;
  const PriorT<T, Mixture> prior(a.prior);
  std::vector<int64_t> sizes(k);
  for (int t = 0; t < k; ++t) sizes[t] = inputs->at(t).size();
  const std::vector<Chunk> chunks = make_chunks(sizes);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  std::vector<double> partial(num_chunks, 0.0);
  Key key = a.key;
  if (!a.eps_given && !a.key_given) {
    mx_cpu_rand_t* states = res.get_cpu_rand_states();
    if (states == nullptr) {
      MX_ERROR_MSG << "gluon_bbb_variational: MXNet gave no CPU random states";
      return MX_FAIL;
    }
    key = draw_key(states);
  }
  // where this draw's eps goes when it is kept for the backward pass
  const std::vector<int64_t> offsets = offsets_of(sizes);
  int kept_slot = -1;
  uint64_t draw_id = 0;
  std::shared_ptr<NoiseStore::Buffer> kept;
  const int64_t total = offsets[k - 1] + sizes[k - 1];
  if (a.keep_eps && !a.eps_given && !a.return_eps)
    kept = NoiseStore::get().to_write(kept_contents<T, Mixture, ClosedForm>(key, sizes, total),
                                      &draw_id, &kept_slot);
  write_key(a.eps_given ? Key() : key, draw_id, outputs->at(k + 1).data<T>());
  T* const kept_eps = kept ? reinterpret_cast<T*>(kept->data()) : nullptr;
  // the mixture's d log P / dw, kept after eps (the backward pass then needs no exponential)
  T* const kept_prior_grad = kept_eps && Mixture && !ClosedForm ? kept_eps + total : nullptr;
#pragma omp parallel num_threads(num_threads_for(num_chunks))
  {
    std::vector<T> u1(kChunk / 2), u2(kChunk / 2), scratch(a.return_eps || kept_eps ? 0 : kChunk);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) {
      const Chunk& ch = chunks[c];
      const int t = ch.tensor;
      const T* mu = inputs->at(t).data<T>() + ch.begin;
      const T* rho = inputs->at(k + t).data<T>() + ch.begin;
      T* w = outputs->at(t).data<T>() + ch.begin;
      const T* eps;
      if (a.eps_given && !a.return_eps) {
        eps = inputs->at(2 * k + t).data<T>() + ch.begin;
      } else {
        T* drawn = a.return_eps ? outputs->at(k + 2 + t).data<T>() + ch.begin
                   : kept_eps   ? kept_eps + offsets[t] + ch.begin
                                : scratch.data();
        if (a.eps_given) {
          std::memcpy(drawn, inputs->at(2 * k + t).data<T>() + ch.begin, ch.size * sizeof(T));
        } else {
          fill_normal(key, static_cast<uint32_t>(t), ch.begin, drawn, ch.size, u1.data(),
                      u2.data());
        }
        eps = drawn;
      }
      if constexpr (Diagonal) {
        const T* m = inputs->at(prior_input0(a) + t).data<T>() + ch.begin;
        const T* s = inputs->at(prior_input0(a) + k + t).data<T>() + ch.begin;
        partial[c] = ClosedForm ? diag_kl_forward_chunk(mu, rho, eps, m, s, w, ch.size)
                                : diag_forward_chunk(mu, rho, eps, m, s, w, ch.size);
      } else if constexpr (ClosedForm) {  // instantiated with the Gaussian prior only
        partial[c] = kl_forward_chunk(prior, mu, rho, eps, w, ch.size);
      } else {
        partial[c] = forward_chunk(prior, mu, rho, eps, w, ch.size,
                                   kept_prior_grad ? kept_prior_grad + offsets[t] + ch.begin
                                                   : nullptr);
      }
    }
  }
  // Both log q and log P carry -log(2 pi)/2 per value; they cancel and are left out.
  double complexity = 0.0;
  for (double p : partial) complexity += p;
  NoiseStore::get().mark_complete(kept_slot, draw_id);
  outputs->at(k).data<T>()[0] = static_cast<T>(complexity);
  return MX_SUCCESS;
}

template <typename T, bool Mixture, bool ClosedForm, bool Diagonal = false>
MXReturnValue backward_typed(const Attrs& a, std::vector<MXTensor>* inputs,
                             std::vector<MXTensor>* outputs) {
  // inputs: gradients of the forward's outputs, then its inputs, then its outputs.
  const int k = a.num_tensors;
  const int num_fwd_inputs = num_inputs(a);
  const int num_fwd_outputs = (a.return_eps ? 2 : 1) * k + 2;
  const int in0 = num_fwd_outputs, out0 = in0 + num_fwd_inputs;
  const PriorT<T, Mixture> prior(a.prior);
  const T g_complexity = inputs->at(k).data<T>()[0];
  const Key key = read_key(inputs->at(out0 + k + 1).data<T>());
  std::vector<int64_t> sizes(k);
  for (int t = 0; t < k; ++t) sizes[t] = inputs->at(in0 + t).size();
  const std::vector<Chunk> chunks = make_chunks(sizes);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  const std::vector<int64_t> offsets = offsets_of(sizes);
  const int64_t total = offsets[k - 1] + sizes[k - 1];
  std::shared_ptr<NoiseStore::Buffer> kept;  // the forward's eps, if it kept it
  if (a.keep_eps && !a.eps_given && !a.return_eps)
    kept = NoiseStore::get().take(read_draw_id(inputs->at(out0 + k + 1).data<T>()),
                                  kept_contents<T, Mixture, ClosedForm>(key, sizes, total));
  const T* const kept_eps = kept ? reinterpret_cast<const T*>(kept->data()) : nullptr;
  const T* const kept_prior_grad = kept_eps && Mixture && !ClosedForm ? kept_eps + total : nullptr;
#pragma omp parallel num_threads(num_threads_for(num_chunks))
  {
    const bool redraw = !a.eps_given && !a.return_eps && !kept_eps;
    std::vector<T> u1(redraw ? kChunk / 2 : 0), u2(redraw ? kChunk / 2 : 0);
    std::vector<T> scratch(redraw ? kChunk : 0);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) {
      const Chunk& ch = chunks[c];
      const int t = ch.tensor;
      const T* g_w = inputs->at(t).data<T>();
      const T* rho = inputs->at(in0 + k + t).data<T>() + ch.begin;
      const T* w = inputs->at(out0 + t).data<T>() + ch.begin;
      const T* eps;
      if (a.return_eps) {
        eps = inputs->at(out0 + k + 2 + t).data<T>() + ch.begin;
      } else if (a.eps_given) {
        eps = inputs->at(in0 + 2 * k + t).data<T>() + ch.begin;
      } else if (kept_eps) {  // the forward's noise, as it kept it
        eps = kept_eps + offsets[t] + ch.begin;
      } else {  // the forward's noise, drawn again from its key
        fill_normal(key, static_cast<uint32_t>(t), ch.begin, scratch.data(), ch.size, u1.data(),
                    u2.data());
        eps = scratch.data();
      }
      T* g_mu = outputs->at(t).data<T>() + ch.begin;
      T* g_rho = outputs->at(k + t).data<T>() + ch.begin;
      if constexpr (Diagonal) {
        const int p0 = prior_input0(a);
        const T* m = inputs->at(in0 + p0 + t).data<T>() + ch.begin;
        const T* s = inputs->at(in0 + p0 + k + t).data<T>() + ch.begin;
        T* g_m = outputs->at(p0 + t).data<T>() + ch.begin;
        T* g_s = outputs->at(p0 + k + t).data<T>() + ch.begin;
        const T* gw = g_w ? g_w + ch.begin : nullptr;
        if (ClosedForm)
          diag_kl_backward_chunk(g_complexity, gw, inputs->at(in0 + t).data<T>() + ch.begin, rho,
                                 eps, m, s, g_mu, g_rho, g_m, g_s, ch.size);
        else
          diag_backward_chunk(g_complexity, gw, rho, eps, w, m, s, g_mu, g_rho, g_m, g_s,
                              ch.size);
      } else if constexpr (ClosedForm) {
        const T* mu = inputs->at(in0 + t).data<T>() + ch.begin;
        kl_backward_chunk(prior, g_complexity, g_w ? g_w + ch.begin : nullptr, mu, rho,
                          eps, g_mu, g_rho, ch.size);
      } else {
        const T* gw = g_w ? g_w + ch.begin : nullptr;
        if (kept_prior_grad)
          backward_chunk<T, Mixture, true>(prior, g_complexity, gw, rho, eps, w,
                                           kept_prior_grad + offsets[t] + ch.begin, g_mu, g_rho,
                                           ch.size);
        else
          backward_chunk<T, Mixture, false>(prior, g_complexity, gw, rho, eps, w, nullptr, g_mu,
                                            g_rho, ch.size);
      }
      if (a.eps_given)
        std::memset(outputs->at(2 * k + t).data<T>() + ch.begin, 0, ch.size * sizeof(T));
    }
  }
  return MX_SUCCESS;
}

MXReturnValue forward(const std::unordered_map<std::string, std::string>& attrs,
                      std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                      const OpResource& res) {
  Attrs a;
  if (parse(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  const bool f64 = inputs->at(0).dtype == kFloat64;
  if (a.prior.diagonal && a.closed_form)
    return f64 ? forward_typed<double, false, true, true>(a, inputs, outputs, res)
               : forward_typed<float, false, true, true>(a, inputs, outputs, res);
  if (a.prior.diagonal)
    return f64 ? forward_typed<double, false, false, true>(a, inputs, outputs, res)
               : forward_typed<float, false, false, true>(a, inputs, outputs, res);
  if (a.prior.mixture)
    return f64 ? forward_typed<double, true, false>(a, inputs, outputs, res)
               : forward_typed<float, true, false>(a, inputs, outputs, res);
  if (a.closed_form)
    return f64 ? forward_typed<double, false, true>(a, inputs, outputs, res)
               : forward_typed<float, false, true>(a, inputs, outputs, res);
  return f64 ? forward_typed<double, false, false>(a, inputs, outputs, res)
             : forward_typed<float, false, false>(a, inputs, outputs, res);
}

MXReturnValue backward(const std::unordered_map<std::string, std::string>& attrs,
                       std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                       const OpResource& res) {
  Attrs a;
  if (parse(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  const bool f64 = inputs->at(0).dtype == kFloat64;
  if (a.prior.diagonal && a.closed_form)
    return f64 ? backward_typed<double, false, true, true>(a, inputs, outputs)
               : backward_typed<float, false, true, true>(a, inputs, outputs);
  if (a.prior.diagonal)
    return f64 ? backward_typed<double, false, false, true>(a, inputs, outputs)
               : backward_typed<float, false, false, true>(a, inputs, outputs);
  if (a.prior.mixture)
    return f64 ? backward_typed<double, true, false>(a, inputs, outputs)
               : backward_typed<float, true, false>(a, inputs, outputs);
  if (a.closed_form)
    return f64 ? backward_typed<double, false, true>(a, inputs, outputs)
               : backward_typed<float, false, true>(a, inputs, outputs);
  return f64 ? backward_typed<double, false, false>(a, inputs, outputs)
             : backward_typed<float, false, false>(a, inputs, outputs);
}


// ================================================================== finite guard
// gluon_bbb_finite_guard(cost, g_1..g_K) -> flag (1,): 1 if the cost and every gradient are
// finite; otherwise 0, and every g_k is zeroed in place (the g_k are mutable inputs). This is
// the skip of a non-finite step, without a host sync, in one pass over the gradients.

MXReturnValue guard_parse(const std::unordered_map<std::string, std::string>& attrs,
                          int* num_in, int* num_out) {
  int k = 0;
  if (parse_count(attrs, &k, "gluon_bbb_finite_guard") != MX_SUCCESS) return MX_FAIL;
  *num_in = k + 1;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue guard_mutate(const std::unordered_map<std::string, std::string>& attrs,
                           std::vector<int>* indices) {
  int k = 0;
  if (parse_count(attrs, &k, "gluon_bbb_finite_guard") != MX_SUCCESS) return MX_FAIL;
  for (int t = 1; t <= k; ++t) indices->push_back(t);
  return MX_SUCCESS;
}

MXReturnValue scalar_output_shape(const std::unordered_map<std::string, std::string>& attrs,
                                  std::vector<std::vector<unsigned int>>* in_shapes,
                                  std::vector<std::vector<unsigned int>>* out_shapes) {
  out_shapes->at(0) = {1};
  return MX_SUCCESS;
}

template <typename T>
MXReturnValue guard_typed(int k, std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs) {
  std::vector<int64_t> sizes(k);
  for (int t = 0; t < k; ++t) sizes[t] = inputs->at(1 + t).size();
  const std::vector<Chunk> chunks = make_chunks(sizes);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  std::vector<T> partial(num_chunks, T(0));
#pragma omp parallel for schedule(static) num_threads(num_threads_for(num_chunks))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const T* g = inputs->at(1 + chunks[c].tensor).data<T>() + chunks[c].begin;
    T acc = T(0);
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < chunks[c].size; ++i) acc += g[i] * T(0);  // NaN iff any is inf/NaN
    partial[c] = acc;
  }
  T acc = inputs->at(0).data<T>()[0] * T(0);
  for (T p : partial) acc += p;
  const bool finite = acc == T(0);
  if (!finite) {
    for (int t = 0; t < k; ++t)
      std::memset(inputs->at(1 + t).data<T>(), 0, sizes[t] * sizeof(T));
  }
  outputs->at(0).data<T>()[0] = finite ? T(1) : T(0);
  return MX_SUCCESS;
}

MXReturnValue guard_forward(const std::unordered_map<std::string, std::string>& attrs,
                            std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                            const OpResource& res) {
  int k = 0;
  if (parse_count(attrs, &k, "gluon_bbb_finite_guard") != MX_SUCCESS) return MX_FAIL;
  if (inputs->at(0).dtype == kFloat64) return guard_typed<double>(k, inputs, outputs);
  return guard_typed<float>(k, inputs, outputs);
}

// ================================================================== Adam
// gluon_bbb_adam(w_1..w_K, g_1..g_K, m_1..m_K, v_1..v_K) -> dummy (1,), updating w, m and v in
// place with MXNet's adam_update rule for every tensor in one pass:
//   g <- clip(rescale_grad * g + wd_k * w);  m <- b1 m + (1 - b1) g;  v <- b2 v + (1 - b2) g^2
//   w <- w - lr_k * m / (sqrt(v) + epsilon)
// lr_k already holds Adam's bias correction (computed in Python, as mxnet's Adam does).

struct AdamAttrs {
  int k = 0;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, rescale_grad = 1.0, clip_gradient = -1.0;
  std::vector<double> lrs, wds;
};

bool parse_list(const std::unordered_map<std::string, std::string>& attrs, const char* key,
                size_t expected, std::vector<double>* out) {
  auto it = attrs.find(key);
  if (it == attrs.end()) return false;
  std::stringstream stream(it->second);
  std::string item;
  while (std::getline(stream, item, ',')) {
    try {
      out->push_back(std::stod(item));
    } catch (...) {
      return false;
    }
  }
  return out->size() == expected;
}

MXReturnValue adam_attrs(const std::unordered_map<std::string, std::string>& attrs, AdamAttrs* a) {
  if (parse_count(attrs, &a->k, "gluon_bbb_adam") != MX_SUCCESS) return MX_FAIL;
  const size_t k = static_cast<size_t>(a->k);
  if (!parse_list(attrs, "lrs", k, &a->lrs) || !parse_list(attrs, "wds", k, &a->wds) ||
      !get_double(attrs, "beta1", &a->beta1) || !get_double(attrs, "beta2", &a->beta2) ||
      !get_double(attrs, "epsilon", &a->epsilon) ||
      !get_double(attrs, "rescale_grad", &a->rescale_grad) ||
      !get_double(attrs, "clip_gradient", &a->clip_gradient)) {
    MX_ERROR_MSG << "gluon_bbb_adam: needs num_tensors, lrs and wds (num_tensors values each), "
                 << "beta1, beta2, epsilon, rescale_grad, clip_gradient";
    return MX_FAIL;
  }
  return MX_SUCCESS;
}

MXReturnValue adam_parse(const std::unordered_map<std::string, std::string>& attrs,
                         int* num_in, int* num_out) {
  AdamAttrs a;
  if (adam_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  *num_in = 4 * a.k;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue adam_mutate(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<int>* indices) {
  AdamAttrs a;
  if (adam_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  for (int t = 0; t < a.k; ++t) {
    indices->push_back(t);            // w
    indices->push_back(2 * a.k + t);  // m
    indices->push_back(3 * a.k + t);  // v
  }
  return MX_SUCCESS;
}

MXReturnValue adam_shape(const std::unordered_map<std::string, std::string>& attrs,
                         std::vector<std::vector<unsigned int>>* in_shapes,
                         std::vector<std::vector<unsigned int>>* out_shapes) {
  AdamAttrs a;
  if (adam_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  for (int t = 0; t < a.k; ++t) {
    for (int group = 1; group < 4; ++group) {
      if (in_shapes->at(group * a.k + t) != in_shapes->at(t)) {
        MX_ERROR_MSG << "gluon_bbb_adam: tensor " << t << ": weight, grad, mean and var shapes differ";
        return MX_FAIL;
      }
    }
  }
  out_shapes->at(0) = {1};
  return MX_SUCCESS;
}

template <typename T>
MXReturnValue adam_typed(const AdamAttrs& a, std::vector<MXTensor>* inputs,
                         std::vector<MXTensor>* outputs) {
  const int k = a.k;
  std::vector<int64_t> sizes(k);
  for (int t = 0; t < k; ++t) sizes[t] = inputs->at(t).size();
  const std::vector<Chunk> chunks = make_chunks(sizes);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  const T b1 = T(a.beta1), b2 = T(a.beta2), eps = T(a.epsilon), rescale = T(a.rescale_grad);
  const T clip = T(a.clip_gradient);
  const bool clipping = a.clip_gradient > 0;
#pragma omp parallel for schedule(static) num_threads(num_threads_for(num_chunks))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int t = chunks[c].tensor;
    const int64_t b = chunks[c].begin;
    T* w = inputs->at(t).data<T>() + b;
    const T* g = inputs->at(k + t).data<T>() + b;
    T* m = inputs->at(2 * k + t).data<T>() + b;
    T* v = inputs->at(3 * k + t).data<T>() + b;
    const T lr = T(a.lrs[t]), wd = T(a.wds[t]);
#pragma omp simd
    for (int64_t i = 0; i < chunks[c].size; ++i) {
      T gi = rescale * g[i] + wd * w[i];  // as mxnet's AdamUpdateKernel: decay, then clip
      if (clipping) gi = gi > clip ? clip : (gi < -clip ? -clip : gi);
      const T mi = b1 * m[i] + (T(1) - b1) * gi;
      const T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      w[i] -= lr * mi / (std::sqrt(vi) + eps);
    }
  }
  outputs->at(0).data<T>()[0] = T(0);
  return MX_SUCCESS;
}

MXReturnValue adam_forward(const std::unordered_map<std::string, std::string>& attrs,
                           std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                           const OpResource& res) {
  AdamAttrs a;
  if (adam_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  if (inputs->at(0).dtype == kFloat64) return adam_typed<double>(a, inputs, outputs);
  return adam_typed<float>(a, inputs, outputs);
}

// ================================================================== SGD
// gluon_bbb_sgd(w_1..w_K, g_1..g_K [, m_1..m_K]) -> dummy (1,), updating w (and the momentum m,
// given when momentum > 0) in place with MXNet's sgd_update / sgd_mom_update rule for every
// tensor in one pass:
//   m <- momentum m - lr_k wd_k w - lr_k clip(rescale_grad g)     (m = 0 without momentum)
//   w <- w + m

struct SgdAttrs {
  int k = 0;
  double momentum = 0.0, rescale_grad = 1.0, clip_gradient = -1.0;
  std::vector<double> lrs, wds;
};

MXReturnValue sgd_attrs(const std::unordered_map<std::string, std::string>& attrs, SgdAttrs* a) {
  if (parse_count(attrs, &a->k, "gluon_bbb_sgd") != MX_SUCCESS) return MX_FAIL;
  const size_t k = static_cast<size_t>(a->k);
  if (!parse_list(attrs, "lrs", k, &a->lrs) || !parse_list(attrs, "wds", k, &a->wds) ||
      !get_double(attrs, "momentum", &a->momentum) ||
      !get_double(attrs, "rescale_grad", &a->rescale_grad) ||
      !get_double(attrs, "clip_gradient", &a->clip_gradient) || !(a->momentum >= 0.0)) {
    MX_ERROR_MSG << "gluon_bbb_sgd: needs num_tensors, lrs and wds (num_tensors values each), "
                 << "momentum (>= 0), rescale_grad, clip_gradient";
    return MX_FAIL;
  }
  return MX_SUCCESS;
}

int sgd_groups(const SgdAttrs& a) { return a.momentum > 0.0 ? 3 : 2; }

MXReturnValue sgd_parse(const std::unordered_map<std::string, std::string>& attrs,
                        int* num_in, int* num_out) {
  SgdAttrs a;
  if (sgd_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  *num_in = sgd_groups(a) * a.k;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue sgd_mutate(const std::unordered_map<std::string, std::string>& attrs,
                         std::vector<int>* indices) {
  SgdAttrs a;
  if (sgd_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  for (int t = 0; t < a.k; ++t) {
    indices->push_back(t);                                   // w
    if (a.momentum > 0.0) indices->push_back(2 * a.k + t);   // m
  }
  return MX_SUCCESS;
}

MXReturnValue sgd_shape(const std::unordered_map<std::string, std::string>& attrs,
                        std::vector<std::vector<unsigned int>>* in_shapes,
                        std::vector<std::vector<unsigned int>>* out_shapes) {
  SgdAttrs a;
  if (sgd_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  for (int t = 0; t < a.k; ++t) {
    for (int group = 1; group < sgd_groups(a); ++group) {
      if (in_shapes->at(group * a.k + t) != in_shapes->at(t)) {
        MX_ERROR_MSG << "gluon_bbb_sgd: tensor " << t << ": weight, grad and momentum shapes differ";
        return MX_FAIL;
      }
    }
  }
  out_shapes->at(0) = {1};
  return MX_SUCCESS;
}

template <typename T, bool Momentum>
MXReturnValue sgd_typed(const SgdAttrs& a, std::vector<MXTensor>* inputs,
                        std::vector<MXTensor>* outputs) {
  const int k = a.k;
  std::vector<int64_t> sizes(k);
  for (int t = 0; t < k; ++t) sizes[t] = inputs->at(t).size();
  const std::vector<Chunk> chunks = make_chunks(sizes);
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  const T momentum = T(a.momentum), rescale = T(a.rescale_grad), clip = T(a.clip_gradient);
  const bool clipping = a.clip_gradient >= 0;
#pragma omp parallel for schedule(static) num_threads(num_threads_for(num_chunks))
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int t = chunks[c].tensor;
    const int64_t b = chunks[c].begin;
    T* w = inputs->at(t).data<T>() + b;
    const T* g = inputs->at(k + t).data<T>() + b;
    T* m = Momentum ? inputs->at(2 * k + t).data<T>() + b : nullptr;
    // grouped as mxnet's kernels group them: (lr wd) w, and (lr rescale) g without clipping
    const T lr = T(a.lrs[t]), lr_wd = lr * T(a.wds[t]), lr_rescale = lr * rescale;
#pragma omp simd
    for (int64_t i = 0; i < chunks[c].size; ++i) {
      T descent;
      if (clipping) {
        T gi = rescale * g[i];
        gi = gi > clip ? clip : (gi < -clip ? -clip : gi);
        descent = lr * gi;
      } else {
        descent = lr_rescale * g[i];
      }
      const T step = (Momentum ? momentum * m[i] : T(0)) - lr_wd * w[i] - descent;
      if (Momentum) m[i] = step;
      w[i] += step;
    }
  }
  outputs->at(0).data<T>()[0] = T(0);
  return MX_SUCCESS;
}

MXReturnValue sgd_forward(const std::unordered_map<std::string, std::string>& attrs,
                          std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                          const OpResource& res) {
  SgdAttrs a;
  if (sgd_attrs(attrs, &a) != MX_SUCCESS) return MX_FAIL;
  const bool f64 = inputs->at(0).dtype == kFloat64;
  if (a.momentum > 0.0)
    return f64 ? sgd_typed<double, true>(a, inputs, outputs) : sgd_typed<float, true>(a, inputs, outputs);
  return f64 ? sgd_typed<double, false>(a, inputs, outputs) : sgd_typed<float, false>(a, inputs, outputs);
}

// ================================================================== Gaussian sample
// gluon_bbb_normal(mean, scale) -> out, all three of one shape and dtype (float32 or float64):
//   out = mean + s * eps,  eps ~ N(0, 1),  s = scale          (scale_is="std", the default)
//                                          s = sqrt(scale)    (scale_is="variance", scale >= 0)
// eps is drawn exactly as in gluon_bbb_variational (one tensor, a fresh key from MXNet's random
// state, or the attribute key), so out depends only on the seed (mx.random.seed), never on the
// number of threads. Used for the local reparameterisation trick (Kingma, Salimans & Welling
// 2015): the pre-activations of a Dense layer are drawn from their Gaussian instead of drawing
// its weights. Forward only (no gradient).

MXReturnValue normal_scale_is(const std::unordered_map<std::string, std::string>& attrs,
                              bool* variance) {
  auto it = attrs.find("scale_is");
  const std::string kind = it == attrs.end() ? "std" : it->second;
  if (kind != "std" && kind != "variance") {
    MX_ERROR_MSG << "gluon_bbb_normal: attribute scale_is must be 'std' or 'variance', got '"
                 << kind << "'";
    return MX_FAIL;
  }
  *variance = kind == "variance";
  return MX_SUCCESS;
}

MXReturnValue normal_parse(const std::unordered_map<std::string, std::string>& attrs,
                           int* num_in, int* num_out) {
  bool variance = false, key_given = false;
  Key key;
  if (normal_scale_is(attrs, &variance) != MX_SUCCESS) return MX_FAIL;
  if (parse_key(attrs, &key_given, &key, "gluon_bbb_normal") != MX_SUCCESS) return MX_FAIL;
  *num_in = 2;
  *num_out = 1;
  return MX_SUCCESS;
}

MXReturnValue normal_shape(const std::unordered_map<std::string, std::string>& attrs,
                           std::vector<std::vector<unsigned int>>* in_shapes,
                           std::vector<std::vector<unsigned int>>* out_shapes) {
  if (in_shapes->at(1) != in_shapes->at(0)) {
    MX_ERROR_MSG << "gluon_bbb_normal: mean and scale have different shapes";
    return MX_FAIL;
  }
  out_shapes->at(0) = in_shapes->at(0);
  return MX_SUCCESS;
}

template <typename T>
MXReturnValue normal_typed(bool variance, bool key_given, Key key, std::vector<MXTensor>* inputs,
                           std::vector<MXTensor>* outputs, const OpResource& res) {
  const std::vector<Chunk> chunks = make_chunks({inputs->at(0).size()});
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
  if (num_chunks == 0) return MX_SUCCESS;
  if (!key_given) {
    mx_cpu_rand_t* states = res.get_cpu_rand_states();
    if (states == nullptr) {
      MX_ERROR_MSG << "gluon_bbb_normal: MXNet gave no CPU random states";
      return MX_FAIL;
    }
    key = draw_key(states);
  }
  const T* mean = inputs->at(0).data<T>();
  const T* scale = inputs->at(1).data<T>();
  T* out = outputs->at(0).data<T>();
#pragma omp parallel num_threads(num_threads_for(num_chunks))
  {
    std::vector<T> u1(kChunk / 2), u2(kChunk / 2);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) {
      const int64_t b = chunks[c].begin, n = chunks[c].size;
      T* o = out + b;
      fill_normal(key, 0u, b, o, n, u1.data(), u2.data());  // eps, in place
      const T* m = mean + b;
      const T* s = scale + b;
      if (variance) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = m[i] + std::sqrt(s[i]) * o[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = m[i] + s[i] * o[i];
      }
    }
  }
  return MX_SUCCESS;
}

MXReturnValue normal_forward(const std::unordered_map<std::string, std::string>& attrs,
                             std::vector<MXTensor>* inputs, std::vector<MXTensor>* outputs,
                             const OpResource& res) {
  bool variance = false, key_given = false;
  Key key;
  if (normal_scale_is(attrs, &variance) != MX_SUCCESS) return MX_FAIL;
  if (parse_key(attrs, &key_given, &key, "gluon_bbb_normal") != MX_SUCCESS) return MX_FAIL;
  if (inputs->at(0).dtype == kFloat64)
    return normal_typed<double>(variance, key_given, key, inputs, outputs, res);
  return normal_typed<float>(variance, key_given, key, inputs, outputs, res);
}

}  // namespace

REGISTER_OP(gluon_bbb_variational)
    .setParseAttrs(parse_attrs)
    .setInferType(same_dtype_as_first)
    .setInferShape(infer_shape)
    .setForward(forward, "cpu")
    .setBackward(backward, "cpu");

REGISTER_OP(gluon_bbb_finite_guard)
    .setParseAttrs(guard_parse)
    .setMutateInputs(guard_mutate)
    .setInferType(same_dtype_as_first)
    .setInferShape(scalar_output_shape)
    .setForward(guard_forward, "cpu");

REGISTER_OP(gluon_bbb_adam)
    .setParseAttrs(adam_parse)
    .setMutateInputs(adam_mutate)
    .setInferType(same_dtype_as_first)
    .setInferShape(adam_shape)
    .setForward(adam_forward, "cpu");

REGISTER_OP(gluon_bbb_sgd)
    .setParseAttrs(sgd_parse)
    .setMutateInputs(sgd_mutate)
    .setInferType(same_dtype_as_first)
    .setInferShape(sgd_shape)
    .setForward(sgd_forward, "cpu");

REGISTER_OP(gluon_bbb_normal)
    .setParseAttrs(normal_parse)
    .setInferType(same_dtype_as_first)
    .setInferShape(normal_shape)
    .setForward(normal_forward, "cpu");

// ------------------------------------------------------------------ the error-message bridge
#undef _msgSize
#undef _msgGet
extern "C" int _msgSize() { return ErrorMessages::get().size(); }
extern "C" void _msgGet(int idx, const char** msg) { *msg = ErrorMessages::get().read(idx); }

// ------------------------------------------------------------------ the mutable-input bridge
// MXNet asks a library for an operator's mutable inputs (the finite guard's gradients, Adam's
// weights and moments) on every call, through _opCallMutateInputs. The definition in the
// wheel's lib_api.cc hands back an index array from malloc, and MXNet's side
// (src/c_api/c_api.cc, the mutate_inputs lambda) copies it and never frees it: 4 bytes per
// index plus malloc's overhead leaked at every call, so a long run grew without bound.
// The build renames lib_api.cc's definition (-D_opCallMutateInputs=..., see fused.py), and
// this one keeps the array in a buffer of the calling thread instead. MXNet copies the indices
// before that thread can call again, so the buffer may be reused and nothing is allocated per
// call once it has its size.
#undef _opCallMutateInputs
extern "C" int _opCallMutateInputs(mutateInputs_t mutate, const char* const* keys,
                                   const char* const* vals, int num, int** mutate_indices,
                                   int* indices_size) {
  std::unordered_map<std::string, std::string> attrs;
  for (int i = 0; i < num; i++) attrs[std::string(keys[i])] = std::string(vals[i]);
  thread_local std::vector<int> indices;
  indices.clear();
  const int status = mutate(attrs, &indices);
  if (!status) return status;
  *indices_size = static_cast<int>(indices.size());
  *mutate_indices = indices.data();
  return status;
}

MXReturnValue initialize(int version) {
  if (version < 10900) {
    MX_ERROR_MSG << "gluon_bbb_variational needs MXNet >= 1.9, got version " << version;
    return MX_FAIL;
  }
  return MX_SUCCESS;
}
