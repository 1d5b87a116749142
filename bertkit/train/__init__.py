"""Training: one loop (`Trainer`), AdamW groups with LLRD, warmup schedules, DDP, batching."""

from bertkit.train.batching import LengthBucketedBatches
from bertkit.train.distributed import DistContext, init_distributed
from bertkit.train.optim import build_optimizer, layer_index, param_groups
from bertkit.train.schedule import WarmupDecay, build_scheduler
from bertkit.train.trainer import TrainConfig, Trainer, latest_checkpoint, list_checkpoints

__all__ = ["Trainer", "TrainConfig", "LengthBucketedBatches", "DistContext", "init_distributed",
           "build_optimizer", "param_groups", "layer_index", "build_scheduler", "WarmupDecay",
           "latest_checkpoint", "list_checkpoints"]
