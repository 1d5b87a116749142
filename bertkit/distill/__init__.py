"""Knowledge distillation components: losses, student initialisation, the teacher+student
wrapper a Trainer runs. Recipes that use them live in `bertkit/recipes/distill.py`."""

from bertkit.distill.kd import (DistillationOutput, Distiller, distillation_loss, every_other_layer,
                                student_from_teacher)

__all__ = ["DistillationOutput", "Distiller", "distillation_loss", "every_other_layer", "student_from_teacher"]
