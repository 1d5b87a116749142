"""Training: one loop (`Trainer`), AdamW groups with LLRD, warmup schedules, DDP, batching."""

from .batching import LengthBucketedBatches
from .distributed import DistContext, init_distributed
from .optim import build_optimizer, layer_index, param_groups
from .schedule import WarmupDecay, build_scheduler
from .trainer import TrainConfig, Trainer, latest_checkpoint, list_checkpoints

__all__ = ["Trainer", "TrainConfig", "LengthBucketedBatches", "DistContext", "init_distributed",
           "build_optimizer", "param_groups", "layer_index", "build_scheduler", "WarmupDecay",
           "latest_checkpoint", "list_checkpoints"]
