"""Types of the host op tree's compiled stack sweep (``_optree.c``; see ``optree``)."""

import numpy as np
import numpy.typing as npt

def parents(
    group: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    can_parent: npt.NDArray[np.bool_],
    ids: npt.NDArray[np.int64],
    out: npt.NDArray[np.int64],
) -> None: ...
