"""Pre-training objectives: one registry entry each (model builder, batch builder, loss, metrics).

Built-in: "mlm", "mlm+nsp", "mlm+sop", "electra"; `register_objective` adds yours (see
`registry.py` and docs/objectives.md). Objectives are components: they never import a recipe.
"""

from bertkit.objectives.registry import (BUILT_IN, OBJECTIVES, Objective, get_objective, import_objective_module,
                                        register_objective)

__all__ = ["BUILT_IN", "OBJECTIVES", "Objective", "get_objective", "import_objective_module", "register_objective"]
