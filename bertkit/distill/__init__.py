"""Knowledge distillation components: losses, student initialisation, the teacher+student
wrappers a Trainer runs. Recipes that use them live in `bertkit/recipes/distill.py`.

- `kd.py`       the soft-target loss (classification, MLM), DistilBERT's student, `Distiller`
- `tasks.py`    the same loss for token classification and QA, `TaskDistiller`
- `tinybert.py` TinyBERT's layer distillation (hidden states, attention maps), `LayerDistiller`
- `pretrain.py` DistilBERT's pre-training triple loss (soft MLM targets, MLM, hidden cosine), `PretrainDistiller`
"""

from bertkit.distill.kd import (DistillationOutput, Distiller, distillation_loss, every_other_layer,
                                student_from_teacher)
from bertkit.distill.pretrain import PretrainDistiller
from bertkit.distill.tasks import TaskDistiller, qa_distillation_loss, token_distillation_loss
from bertkit.distill.tinybert import LayerDistiller, uniform_layer_map

__all__ = ["DistillationOutput", "Distiller", "distillation_loss", "every_other_layer", "student_from_teacher",
           "TaskDistiller", "qa_distillation_loss", "token_distillation_loss", "LayerDistiller",
           "uniform_layer_map", "PretrainDistiller"]
