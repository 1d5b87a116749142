"""Training: one loop (`Trainer`), AdamW groups with LLRD, warmup schedules, DDP, batching."""

from bertkit.train.batching import LengthBucketedBatches
from bertkit.runtime.process_group import DistContext, init_distributed
from bertkit.train.optim import build_optimizer, layer_index, param_groups
from bertkit.train.schedule import WarmupDecay, build_scheduler
from bertkit.runtime.run_dir import latest_checkpoint, list_checkpoints
from bertkit.train.config import TrainConfig
from bertkit.train.trainer import Trainer

__all__ = ["Trainer", "TrainConfig", "LengthBucketedBatches", "DistContext", "init_distributed",
           "build_optimizer", "param_groups", "layer_index", "build_scheduler", "WarmupDecay",
           "latest_checkpoint", "list_checkpoints"]
