# Lives here: sources (_parquet.py, _hf.py, _iterable.py over _chunks.py, _plan.py, _arrow.py),
# _write.py (write_parquet, over _rows.py and _dataset.py: spec and manifest), _spark.py (from_spark),
# _batches.py (fixed-size, spec-checked, resumable) with _casts.py, _mesh.py (onto devices, ahead).
# May import: core, ops, sharding, checks, files, checkpoint (its Group); pyarrow, datasets, pyspark
# and jax only inside the functions that need them. Start at _batches.py, then _parquet.py.
"""Pytree batches for JAX from Parquet, Hugging Face datasets and any iterable: fixed size,
spec-checked, sharded, prefetched onto a mesh, resumable.

A pipeline is a source (:func:`parquet`, :func:`from_hf`, :func:`from_iterable`: chunks of rows
as trees of numpy arrays), :func:`batches` (exactly ``batch_size`` rows, checked against a
spec) and :func:`to_mesh` (jax arrays placed on devices, made ready ahead). Each has
``get_state()`` / ``set_state()``: a JSON-able dict that goes on with exactly the next batch.

>>> import numpy as np
>>> from treekit import ShapeDtype
>>> examples = [{'image': np.full((2, 2), i, np.uint8), 'label': i % 3} for i in range(10)]
>>> spec = {'image': ShapeDtype(('batch', 2, 2), 'u8'), 'label': ShapeDtype(('batch',), 'i32')}
>>> pipeline = batches(from_iterable(examples), 4, spec=spec)
>>> [b['label'].tolist() for b in pipeline]
[[0, 1, 2, 0], [1, 2, 0, 1]]
>>> pipeline.get_state()['batches']
2

pyarrow (``pip install 'jax-treekit[parquet]'``), datasets and jax are imported by the
functions that need them, not by ``import treekit.data``.
"""

from treekit.data._batches import Batches as Batches
from treekit.data._batches import batches as batches
from treekit.data._chunks import Source as Source
from treekit.data._hf import from_hf as from_hf
from treekit.data._iterable import from_iterable as from_iterable
from treekit.data._mesh import OnMesh as OnMesh
from treekit.data._mesh import to_mesh as to_mesh
from treekit.data._parquet import parquet as parquet
from treekit.data._spark import from_spark as from_spark
from treekit.data._write import write_parquet as write_parquet

__all__ = [
    "Batches", "OnMesh", "Source", "batches", "from_hf", "from_iterable", "from_spark", "parquet", "to_mesh",
    "write_parquet",
]
