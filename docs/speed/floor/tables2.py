import json
F = "docs/speed/floor"
def load(name): return json.load(open(f"{F}/{name}.json"))
names = {"bbb-scale-mixture-fused": "scale mixture", "bbb-gaussian-fused": "Gaussian", "bbb-gaussian-closed-form-fused": "Gaussian, closed-form KL"}
print("| network | optimizer | prior | ratio before (rounds 1, 2) | ratio after (rounds 1, 2) | BBB time after / before (rounds 1, 2) | target 1.5 |")
print("|---|---|---|---:|---:|---:|---|")
for w in (400, 1200):
    for opt in ("sgd", "adam"):
        a1, b1 = load(f"epoch_after_{opt}_{w}"), load(f"epoch_before_{opt}_{w}")
        a2, b2 = load(f"epoch_after2_{opt}_{w}"), load(f"epoch_before2_{opt}_{w}")
        for m, label in names.items():
            rb = [b1["ratio_to_deterministic"][m]] + ([b2["ratio_to_deterministic"][m]] if m in b2["ratio_to_deterministic"] else [])
            ra = [a1["ratio_to_deterministic"][m], a2["ratio_to_deterministic"][m]]
            tt = [a1["best_seconds"][m] / b1["best_seconds"][m]] + ([a2["best_seconds"][m] / b2["best_seconds"][m]] if m in b2["best_seconds"] else [])
            met = sum(round(r, 2) <= 1.5 for r in ra)
            verdict = {2: "met in both", 1: "met in one round of two", 0: "**missed**"}[met]
            print(f"| 2x{w} | {'SGD' if opt == 'sgd' else 'Adam'} | {label} | {', '.join(f'{r:.2f}' for r in rb)} | **{ra[0]:.2f}, {ra[1]:.2f}** | {', '.join(f'{t:.2f}' for t in tt)} | {verdict} |")
