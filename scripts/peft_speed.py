"""Seconds per training step (forward + backward + AdamW) of full fine-tuning, LoRA, adapters and
prefix tuning on MiniLM, batch 16 x 128 tokens, measured interleaved in one process."""
import time, torch, warnings
warnings.simplefilter("ignore")
import bertkit
from bertkit.data.assets import minilm_dir
from bertkit.peft import AdapterConfig, LoraConfig, PrefixConfig, get_peft_model

torch.manual_seed(0)
ids = torch.randint(1000, 30000, (16, 128)); labels = torch.randint(0, 5, (16,))
def build(cfg):
    m = bertkit.BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=5).train()
    model = get_peft_model(m, cfg).train() if cfg else m
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    return model, opt
runs = {"full": build(None), "lora": build(LoraConfig()), "adapter": build(AdapterConfig()),
        "prefix": build(PrefixConfig())}
times = {k: [] for k in runs}
for round in range(4):
    for name, (model, opt) in runs.items():
        t = time.perf_counter()
        model(ids, labels=labels).loss.backward(); opt.step(); opt.zero_grad()
        if round:  # the first round warms up
            times[name].append(time.perf_counter() - t)
base = sorted(times["full"])[len(times["full"]) // 2]
for name, ts in times.items():
    med = sorted(ts)[len(ts) // 2]
    print(f"{name:8s} median {med:.2f} s/step  ({med / base:.2f} x full)")
