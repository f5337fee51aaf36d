"""Every technique, behind one registry and one front door.

* :mod:`kaleido.techniques.registry` - ``@register_technique``: per technique its config type, handler, the op
  kinds it decides, the families it refuses, its sweep grid, report family and colour, and whether its saving
  needs the accelerator.  The front door, the comparison's grids, the report, the CLI help and the tests' shared
  tester all read it.
* :mod:`kaleido.techniques.front_door` - ``kaleido.apply(transformer, config)`` / ``kaleido.remove``: the
  config's type picks the technique; a list of configs is a stack.
* :mod:`kaleido.techniques.catalog` - imports every technique (registering it) and gives ``METHODS`` /
  ``make_method`` for the comparison's ``Method`` interface.
* :mod:`kaleido.techniques.kaleido_reuse` - Kaleido itself; one module per other technique beside it
  (:mod:`~kaleido.techniques.step_cache`, :mod:`~kaleido.techniques.cache_dit_peer`, ...), on the shared pieces
  :mod:`~kaleido.techniques.base`, :mod:`~kaleido.techniques.handle`, :mod:`~kaleido.techniques.ledger`,
  :mod:`~kaleido.techniques.shapes` and :mod:`~kaleido.techniques.attention_core`.

See docs/baselines.md and docs/architecture.md.
"""

from kaleido.techniques.catalog import *  # noqa: F401,F403  (METHODS, make_method and every technique's class)
from kaleido.techniques.catalog import __all__ as _catalog_names
from kaleido.techniques.front_door import (applied, apply, config_from_dict, config_to_dict, load_config, remove,
                                           save_config)

__all__ = [*_catalog_names, "apply", "remove", "applied", "config_to_dict", "config_from_dict", "load_config",
           "save_config"]
