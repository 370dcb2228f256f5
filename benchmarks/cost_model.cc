// The cost model of one Bayes-by-Backprop step on the CPU: each pass of the fused operator timed
// alone, with the operator's own kernels, against the machine's memory bandwidth and its rate of
// vectorised exp and log.
//
// The operator's source is included, so every pass below runs the shipped code: the whole
// passes through the operators' entry points (forward_typed, backward_typed, guard_typed,
// sgd_forward, adam_forward), the parts of a pass through the same inline kernels
// (fill_normal, softplus, log_, PriorT, forward_chunk, backward_chunk). Built and run by
// cost_model.py, which prints the tables; this program prints one line per measurement:
//
//   name <TAB> milliseconds (median) <TAB> weights
//
// Usage: cost_model WIDTH REPEATS [cpu]     (784-WIDTH-WIDTH-10 MLP's tensors, float32)
//
// With "cpu" the times are the process's CPU time instead of wall-clock time: with one thread,
// a comparison that other work on the machine disturbs less (never the reported numbers).
#include "variational_op.cc"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>

namespace {

std::vector<int64_t> mlp_sizes(int64_t width) {
  return {784 * width, width, width * width, width, width * 10, 10};
}

bool cpu_clock = false;

double now_ms() {
  if (cpu_clock) {
    timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double, std::milli>(
      std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median_ms(const std::function<void()>& work, int repeats) {
  std::vector<double> times;
  work();  // warm-up
  for (int r = 0; r < repeats; ++r) {
    const double start = now_ms();
    work();
    times.push_back(now_ms() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The medians of `first` and of `second` run one after the other, repeats times (after one
// pair to warm up): a pass that needs the other to run before it each time.
void median_pair_ms(const std::function<void()>& first, const std::function<void()>& second,
                    int repeats, double* first_ms, double* second_ms) {
  std::vector<double> firsts, seconds;
  first();  // warm-up
  second();
  for (int r = 0; r < repeats; ++r) {
    double start = now_ms();
    first();
    firsts.push_back(now_ms() - start);
    start = now_ms();
    second();
    seconds.push_back(now_ms() - start);
  }
  std::sort(firsts.begin(), firsts.end());
  std::sort(seconds.begin(), seconds.end());
  *first_ms = firsts[firsts.size() / 2];
  *second_ms = seconds[seconds.size() / 2];
}

// One float32 array per tensor, filled with values in [lo, hi).
struct Arrays {
  std::vector<std::vector<float>> data;
  Arrays(const std::vector<int64_t>& sizes, float lo, float hi, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t n : sizes) {
      data.emplace_back(n);
      for (float& v : data.back()) v = dist(gen);
    }
  }
  float* at(const Chunk& ch) { return data[ch.tensor].data() + ch.begin; }
  std::vector<MXTensor> tensors() {
    std::vector<MXTensor> out;
    for (size_t t = 0; t < data.size(); ++t)
      out.emplace_back(data[t].data(), std::vector<int64_t>{static_cast<int64_t>(data[t].size())},
                       kFloat32, t, MXContext::CPU());
    return out;
  }
};

// work(chunk, thread-local scratch of kChunk floats) over every chunk, threaded as the operator.
void over_chunks(const std::vector<Chunk>& chunks,
                 const std::function<void(const Chunk&, float*, float*, float*)>& work) {
  const int64_t num_chunks = static_cast<int64_t>(chunks.size());
#pragma omp parallel num_threads(num_threads_for(num_chunks))
  {
    std::vector<float> scratch(kChunk), u1(kChunk / 2), u2(kChunk / 2);
#pragma omp for schedule(static)
    for (int64_t c = 0; c < num_chunks; ++c) work(chunks[c], scratch.data(), u1.data(), u2.data());
  }
}

void report(const char* name, double ms, int64_t weights) {
  std::printf("%s\t%.6f\t%lld\n", name, ms, static_cast<long long>(weights));
}

template <bool Mixture>
Prior paper_prior() {
  Prior p;
  p.mixture = Mixture;
  if (Mixture) {  // pi = 1/2, sigma1 = 1, sigma2 = e^-6, as the benchmarks
    p.c1 = std::log(0.5) - std::log(1.0);
    p.k1 = 0.5;
    p.c2 = std::log(0.5) + 6.0;
    p.k2 = 0.5 * std::exp(12.0);
  } else {
    p.c1 = 0.0;
    p.k1 = 0.5;
  }
  return p;
}

// log P summed over a chunk, and its gradient, as forward_chunk and backward_chunk compute them
// (functions of their own, so that the loops vectorise as the operator's do).
template <bool Mixture>
double log_prior_chunk(const PriorT<float, Mixture>& prior, const float* w, int64_t n) {
  float acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += prior.log_prob(w[i]);
  return acc;
}

template <bool Mixture>
void prior_grad_chunk(const PriorT<float, Mixture>& prior, const float* w, float* out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = prior.grad(w[i]);
}

template <bool Mixture>
void prior_passes(const char* tag, const std::vector<Chunk>& chunks, int64_t n, int repeats,
                  Arrays& mu, Arrays& rho, Arrays& eps, Arrays& w, Arrays& gw, Arrays& gmu,
                  Arrays& grho) {
  const PriorT<float, Mixture> prior(paper_prior<Mixture>());
  std::string name;
  volatile double sink = 0;
  // log P alone over a stored w: reads w.
  name = std::string("log P ") + tag;
  report(name.c_str(), median_ms([&] {
    double total = 0;
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      const double part = log_prior_chunk(prior, w.at(ch), ch.size);
#pragma omp atomic
      total += part;
    });
    sink = sink + total;
  }, repeats), n);
  // d log P / dw alone over a stored w: reads w, writes it into g_mu.
  name = std::string("d log P ") + tag;
  report(name.c_str(), median_ms([&] {
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      prior_grad_chunk(prior, w.at(ch), gmu.at(ch), ch.size);
    });
  }, repeats), n);
  // the forward's arithmetic over a stored eps (forward_chunk): reads mu, rho, eps; writes w.
  name = std::string("forward, eps stored ") + tag;
  report(name.c_str(), median_ms([&] {
    double total = 0;
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      const double part = forward_chunk(prior, mu.at(ch), rho.at(ch), eps.at(ch), w.at(ch), ch.size);
#pragma omp atomic
      total += part;
    });
    sink = sink + total;
  }, repeats), n);
  // the backward's arithmetic over a stored eps (backward_chunk): reads g_w, rho, eps, w;
  // writes g_mu, g_rho.
  name = std::string("backward, eps stored ") + tag;
  report(name.c_str(), median_ms([&] {
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      backward_chunk<float, Mixture, false>(prior, 1e-4f, gw.at(ch), rho.at(ch), eps.at(ch), w.at(ch), nullptr, gmu.at(ch),
                     grho.at(ch), ch.size);
    });
  }, repeats), n);

  // The whole passes through the operator's entry points, as a training step calls them
  // (return_eps=0: the backward pass draws eps again from the key).
  Attrs a;
  a.num_tensors = static_cast<int>(mu.data.size());
  a.return_eps = false;
  a.key_given = true;
  a.key.k0 = 12345u;
  a.key.k1 = 678u;
  a.prior = paper_prior<Mixture>();
  const int k = a.num_tensors;
  float complexity = 0, g_complexity = 1e-4f;
  float key_out[kKeyOutputSize] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::vector<MXTensor> fwd_in = mu.tensors();
  for (auto& t : rho.tensors()) fwd_in.push_back(t);
  std::vector<MXTensor> fwd_out = w.tensors();
  fwd_out.emplace_back(&complexity, std::vector<int64_t>{1}, kFloat32, 100, MXContext::CPU());
  fwd_out.emplace_back(key_out, std::vector<int64_t>{kKeyOutputSize}, kFloat32, 101,
                       MXContext::CPU());
  OpResource res(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  name = std::string("forward pass ") + tag;
  report(name.c_str(), median_ms([&] { forward_typed<float, Mixture, false>(a, &fwd_in, &fwd_out, res); },
                                 repeats), n);
  // backward inputs: gradients of the outputs (g_w.., g_complexity, g_key), the forward's
  // inputs, then its outputs.
  std::vector<MXTensor> bwd_in = gw.tensors();
  bwd_in.emplace_back(&g_complexity, std::vector<int64_t>{1}, kFloat32, 200, MXContext::CPU());
  bwd_in.emplace_back(key_out, std::vector<int64_t>{kKeyOutputSize}, kFloat32, 201,
                      MXContext::CPU());
  for (auto& t : fwd_in) bwd_in.push_back(t);
  for (auto& t : fwd_out) bwd_in.push_back(t);
  std::vector<MXTensor> bwd_out = gmu.tensors();
  for (auto& t : grho.tensors()) bwd_out.push_back(t);
  name = std::string("backward pass ") + tag;
  report(name.c_str(), median_ms([&] { backward_typed<float, Mixture, false>(a, &bwd_in, &bwd_out); },
                                 repeats), n);
  // The same with the forward's eps kept for the backward pass (keep_eps=1), in pairs as a
  // training step runs them: a backward pass reads its forward's kept eps once (which frees
  // the slot for the next forward pass).
  a.keep_eps = true;
  double forward_kept_ms = 0, backward_kept_ms = 0;
  median_pair_ms([&] { forward_typed<float, Mixture, false>(a, &fwd_in, &fwd_out, res); },
                 [&] { backward_typed<float, Mixture, false>(a, &bwd_in, &bwd_out); }, repeats,
                 &forward_kept_ms, &backward_kept_ms);
  name = std::string("forward pass, eps kept ") + tag;
  report(name.c_str(), forward_kept_ms, n);
  name = std::string("backward pass, eps kept ") + tag;
  report(name.c_str(), backward_kept_ms, n);
  a.keep_eps = false;
  if constexpr (!Mixture) {  // the closed-form KL to the Gaussian prior (kl=closed_form)
    a.closed_form = true;
    report("forward pass (closed-form KL)",
           median_ms([&] { forward_typed<float, false, true>(a, &fwd_in, &fwd_out, res); }, repeats),
           n);
    report("backward pass (closed-form KL)",
           median_ms([&] { backward_typed<float, false, true>(a, &bwd_in, &bwd_out); }, repeats), n);
  }
  (void)k;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && std::string(argv[3]) == "cpu")) {
    std::fprintf(stderr, "usage: cost_model WIDTH REPEATS [cpu]\n");
    return 2;
  }
  cpu_clock = argc == 4;
  const int64_t width = std::atoll(argv[1]);
  const int repeats = std::atoi(argv[2]);
  const std::vector<int64_t> sizes = mlp_sizes(width);
  const std::vector<Chunk> chunks = make_chunks(sizes);
  int64_t n = 0;
  for (int64_t s : sizes) n += s;
  Arrays mu(sizes, -0.1f, 0.1f, 1), rho(sizes, -6.0f, -4.0f, 2), eps(sizes, -2.0f, 2.0f, 3);
  Arrays w(sizes, -0.1f, 0.1f, 4), gw(sizes, -1e-3f, 1e-3f, 5), gmu(sizes, 0.0f, 1.0f, 6);
  Arrays grho(sizes, 0.0f, 1.0f, 7), m(sizes, -1e-3f, 1e-3f, 8), v(sizes, 0.0f, 1e-6f, 9);
  volatile float sink = 0;

  // The machine: a triad (reads b and c, writes a: 12 bytes a value) ...
  report("triad", median_ms([&] {
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      float* a = w.at(ch);
      const float* b = mu.at(ch);
      const float* c = eps.at(ch);
#pragma omp simd
      for (int64_t i = 0; i < ch.size; ++i) a[i] = b[i] + 3.0f * c[i];
    });
  }, repeats), n);
  // ... and exp_ and log_ over values in a thread's cache (no memory traffic): the arithmetic
  // rate, one transcendental a value.
  report("exp in cache", median_ms([&] {
    over_chunks(chunks, [&](const Chunk& ch, float* scratch, float*, float*) {
      const float* x = rho.data[0].data();  // the same first chunk, hot in the cache
      float acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < ch.size; ++i) acc += exp_(x[i]);
      scratch[0] = acc;
    });
  }, repeats), n);
  report("log in cache", median_ms([&] {
    over_chunks(chunks, [&](const Chunk& ch, float* scratch, float*, float*) {
      const float* x = v.data[0].data();
      float acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < ch.size; ++i) acc += log_(x[i] + 1e-7f);
      scratch[0] = acc;
    });
  }, repeats), n);

  // The parts of the forward pass.
  const Key key{12345u, 678u};
  report("noise", median_ms([&] {  // Philox4x32-10 and Box-Muller into the thread's scratch
    over_chunks(chunks, [&](const Chunk& ch, float* scratch, float* u1, float* u2) {
      fill_normal(key, static_cast<uint32_t>(ch.tensor), ch.begin, scratch, ch.size, u1, u2);
    });
  }, repeats), n);
  report("philox only", median_ms([&] {  // the generator's rounds without Box-Muller
    over_chunks(chunks, [&](const Chunk& ch, float* scratch, float* u1, float* u2) {
      const int64_t first = ch.begin / 4, blocks = (ch.size + 3) / 4;
#pragma omp simd
      for (int64_t i = 0; i < blocks; ++i) {
        const Block b = philox4x32_10(static_cast<uint64_t>(first + i), ch.tensor, key);
        u1[2 * i] = open_uniform24(b.x0);
        u2[2 * i] = uniform24(b.x1);
        u1[2 * i + 1] = open_uniform24(b.x2);
        u2[2 * i + 1] = uniform24(b.x3);
      }
    });
  }, repeats), n);
  report("sigma", median_ms([&] {  // sigma = softplus(rho): reads rho, writes sigma
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      const float* r = rho.at(ch);
      float* s = gmu.at(ch);
#pragma omp simd
      for (int64_t i = 0; i < ch.size; ++i) s[i] = softplus(r[i]);
    });
  }, repeats), n);
  report("sigma, w", median_ms([&] {  // w = mu + sigma eps: reads mu, rho, eps; writes w
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      const float *mi = mu.at(ch), *r = rho.at(ch), *e = eps.at(ch);
      float* wi = w.at(ch);
#pragma omp simd
      for (int64_t i = 0; i < ch.size; ++i) wi[i] = mi[i] + softplus(r[i]) * e[i];
    });
  }, repeats), n);
  report("sigma, w, log q", median_ms([&] {  // and sum(-log sigma - eps^2 / 2)
    double total = 0;
    over_chunks(chunks, [&](const Chunk& ch, float*, float*, float*) {
      const float *mi = mu.at(ch), *r = rho.at(ch), *e = eps.at(ch);
      float* wi = w.at(ch);
      float acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = 0; i < ch.size; ++i) {
        const float s = softplus(r[i]);
        wi[i] = mi[i] + s * e[i];
        acc += -log_(s) - 0.5f * e[i] * e[i];
      }
#pragma omp atomic
      total += acc;
    });
    sink = sink + static_cast<float>(total);
  }, repeats), n);

  prior_passes<false>("(Gaussian)", chunks, n, repeats, mu, rho, eps, w, gw, gmu, grho);
  prior_passes<true>("(mixture)", chunks, n, repeats, mu, rho, eps, w, gw, gmu, grho);

  // The finite guard and the updates, through the operators' entry points.
  {
    float cost = 1.0f, flag = 0.0f, dummy = 0.0f;
    std::vector<MXTensor> in;
    in.emplace_back(&cost, std::vector<int64_t>{1}, kFloat32, 300, MXContext::CPU());
    for (auto& t : gmu.tensors()) in.push_back(t);
    for (auto& t : grho.tensors()) in.push_back(t);
    std::vector<MXTensor> out;
    out.emplace_back(&flag, std::vector<int64_t>{1}, kFloat32, 301, MXContext::CPU());
    const int k2 = static_cast<int>(2 * sizes.size());
    report("finite guard", median_ms([&] { guard_typed<float>(k2, &in, &out); }, repeats), n);

    // mu and rho: 2 x the weights, as a step updates both
    std::unordered_map<std::string, std::string> attrs;
    std::string lrs, wds;
    for (int t = 0; t < k2; ++t) {
      lrs += (t ? "," : "") + std::string("1e-7");
      wds += (t ? "," : "") + std::string("0");
    }
    attrs["num_tensors"] = std::to_string(k2);
    attrs["lrs"] = lrs;
    attrs["wds"] = wds;
    attrs["rescale_grad"] = "1";
    attrs["clip_gradient"] = "-1";
    attrs["momentum"] = "0";
    std::vector<MXTensor> sgd_in = mu.tensors();
    for (auto& t : rho.tensors()) sgd_in.push_back(t);
    for (auto& t : gmu.tensors()) sgd_in.push_back(t);
    for (auto& t : grho.tensors()) sgd_in.push_back(t);
    out[0] = MXTensor(&dummy, std::vector<int64_t>{1}, kFloat32, 302, MXContext::CPU());
    OpResource res(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    report("update (SGD)", median_ms([&] { sgd_forward(attrs, &sgd_in, &out, res); }, repeats), n);
    attrs["beta1"] = "0.9";
    attrs["beta2"] = "0.999";
    attrs["epsilon"] = "1e-8";
    Arrays m2(sizes, -1e-3f, 1e-3f, 10), v2(sizes, 0.0f, 1e-6f, 11);
    std::vector<MXTensor> adam_in = sgd_in;
    for (auto& t : m.tensors()) adam_in.push_back(t);
    for (auto& t : m2.tensors()) adam_in.push_back(t);
    for (auto& t : v.tensors()) adam_in.push_back(t);
    for (auto& t : v2.tensors()) adam_in.push_back(t);
    report("update (Adam)", median_ms([&] { adam_forward(attrs, &adam_in, &out, res); }, repeats), n);
  }
  (void)sink;
  return 0;
}
