import json, sys
F = "docs/speed/floor"
def load(name): return json.load(open(f"{F}/{name}.json"))
print("| network | optimizer | prior | deterministic (s), before / after | BBB before (s) | ratio before | BBB after (s) | ratio after | after / before |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
names = {"bbb-gaussian-fused": "Gaussian", "bbb-scale-mixture-fused": "scale mixture", "bbb-gaussian-closed-form-fused": "Gaussian, closed-form KL"}
for w in (400, 1200):
    for opt in ("sgd", "adam"):
        a, b = load(f"epoch_after_{opt}_{w}"), load(f"epoch_before_{opt}_{w}")
        for m, label in names.items():
            print(f"| 2x{w} | {opt.upper() if opt=='sgd' else 'Adam'} | {label} | {b['best_seconds']['deterministic']:.2f} / {a['best_seconds']['deterministic']:.2f} | {b['best_seconds'][m]:.2f} | {b['ratio_to_deterministic'][m]:.2f} | {a['best_seconds'][m]:.2f} | **{a['ratio_to_deterministic'][m]:.2f}** | {a['best_seconds'][m]/b['best_seconds'][m]:.2f} |")
print()
sa, sb = load("step_latency_after"), load("step_latency_before")
print("| network | step | before (median / p90 ms) | after |")
print("|---|---|---:|---:|")
for net in sa["networks"]:
    for step in sa["networks"][net]["steps"]:
        if not step.startswith("gluon_bbb"): continue
        x, y = sb["networks"][net]["steps"][step], sa["networks"][net]["steps"][step]
        print(f"| {net} | {step.replace('gluon_bbb ', '')} | {x['median_ms']:.3f} / {x['p90_ms']:.3f} | {y['median_ms']:.3f} / {y['p90_ms']:.3f} |")
print()
pa, pb = load("peer_after"), load("peer_before")
print("| prior | network | optimizer | PyTorch (s), before / after | gluon_bbb before (s) | PyTorch / gluon_bbb before | gluon_bbb after (s) | PyTorch / gluon_bbb after |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for ra, rb in zip(pa["results"], pb["results"]):
    assert (ra["prior"], ra["width"], ra["optimizer"]) == (rb["prior"], rb["width"], rb["optimizer"])
    ta, ga = min(ra["seconds"]["pytorch"]), min(ra["seconds"]["gluon_bbb"])
    tb, gb = min(rb["seconds"]["pytorch"]), min(rb["seconds"]["gluon_bbb"])
    print(f"| {ra['prior']} | 2x{ra['width']} | {'SGD' if ra['optimizer']=='sgd' else 'Adam'} | {tb:.2f} / {ta:.2f} | {gb:.2f} | {tb/gb:.2f} | {ga:.2f} | **{ta/ga:.2f}** |")
